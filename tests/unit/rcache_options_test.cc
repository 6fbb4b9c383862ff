#include <gtest/gtest.h>

#include "core/config/registry.h"
#include "core/config/switches.h"
#include "core/rcache_options.h"

namespace mlxa2a::core {
namespace {

rcache::Options options_for(const config::Environment& env, std::string* error) {
  config::Registry r(config::all_switches());
  r.load(env);
  EXPECT_TRUE(r.warnings().empty()) << r.warnings().front();
  return rcache_options(config::settings_from(r).rcache, error);
}

TEST(RcacheOptions, DefaultsAreValid) {
  std::string error;
  const rcache::Options o = options_for({}, &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(o.alignment, 16u);
  EXPECT_EQ(o.max_regions, 65536u);
  EXPECT_EQ(o.max_bytes, std::size_t{64} << 30);
  EXPECT_EQ(o.invalidation, rcache::Invalidation::kAuto);
}

// The switch's enum choices and rcache's parser must agree, or a value that
// mlxa2a_info lists as valid would be refused at run time.
TEST(RcacheOptions, EveryInvalidationChoiceIsKnownToRcache) {
  const config::Spec* spec = nullptr;
  for (const config::Spec& s : config::all_switches()) {
    if (s.name == "RCACHE_INVALIDATION") spec = &s;
  }
  ASSERT_NE(spec, nullptr);
  for (std::string_view choice : spec->choices) {
    std::string error;
    const rcache::Options o =
        options_for({{"MLXA2A_RCACHE_INVALIDATION", std::string(choice)}}, &error);
    EXPECT_EQ(error, "") << choice;
    EXPECT_EQ(rcache::to_string(o.invalidation), choice);
  }
}

TEST(RcacheOptions, ValuesArePassedThrough) {
  std::string error;
  const rcache::Options o = options_for({{"MLXA2A_RCACHE_ALIGN", "4K"},
                                         {"MLXA2A_RCACHE_MAX_REGIONS", "10"},
                                         {"MLXA2A_RCACHE_MAX_BYTES", "inf"}},
                                        &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(o.alignment, 4096u);
  EXPECT_EQ(o.max_regions, 10u);
  EXPECT_EQ(o.max_bytes, 0u);  // unlimited
}

}  // namespace
}  // namespace mlxa2a::core
