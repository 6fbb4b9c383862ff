#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/config/registry.h"
#include "core/config/switches.h"
#include "core/info/render.h"

namespace mlxa2a::core::info {
namespace {

using config::Registry;

RenderOptions all_levels() {
  RenderOptions o;
  o.max_verbosity = config::Verbosity::Developer;
  return o;
}

TEST(Info, ListingShowsEverySwitchWithValueSourceAndDefault) {
  Registry r(config::all_switches());
  r.load({{"MLXA2A_TUNE", "0-4K:shm"}});
  const std::string text = render_listing(r, all_levels());
  for (const config::Spec& s : config::all_switches()) {
    EXPECT_NE(text.find("MLXA2A_" + std::string(s.name) + "\n"), std::string::npos) << s.name;
  }
  EXPECT_NE(text.find("value:   '0-4K:shm' (env)"), std::string::npos);
  EXPECT_NE(text.find("default: 'auto'"), std::string::npos);
}

TEST(Info, DefaultListingHidesDeveloperSwitches) {
  Registry r(config::all_switches());
  const std::string text = render_listing(r, RenderOptions{});
  EXPECT_EQ(text.find("MLXA2A_LIBDIR"), std::string::npos);
  EXPECT_NE(text.find("MLXA2A_TUNE"), std::string::npos);
}

TEST(Info, ConfigFileIsValidInputAsIs) {
  Registry r(config::all_switches());
  r.load({{"MLXA2A_TUNE", "0-4K:shm#4K-inf:pmpi"}, {"MLXA2A_RCACHE_ALIGN", "64"},
          {"MLXA2A_NET_DEVICES", "mlx5_0:1"}});
  const std::string file_text = render_config_file(r, all_levels());
  char name[] = "/tmp/mlxa2a-info-test-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(name) << file_text;

  Registry back(config::all_switches());
  back.load({{"MLXA2A_CONFIG_FILE", name}});
  std::remove(name);
  EXPECT_TRUE(back.warnings().empty()) << back.warnings().front();
  for (const auto& e : r.entries()) {
    const auto* b = back.find(e.spec->name);
    ASSERT_NE(b, nullptr);
    if (e.spec->env_only) continue;  // written as a comment
    EXPECT_EQ(b->text, e.text) << e.spec->name;
    EXPECT_EQ(b->source, config::Source::File) << e.spec->name;
  }
}

TEST(Info, JsonHasOneObjectPerSwitch) {
  Registry r(config::all_switches());
  r.load({{"MLXA2A_LOG_FILE", "/tmp/a \"quoted\"\tname"}});
  const std::string json = render_json(r, all_levels());
  std::size_t objects = 0;
  for (std::size_t p = json.find("{\"name\""); p != std::string::npos;
       p = json.find("{\"name\"", p + 1)) {
    ++objects;
  }
  EXPECT_EQ(objects, config::all_switches().size());
  EXPECT_NE(json.find(R"("value": "/tmp/a \"quoted\"\tname")"), std::string::npos);
  EXPECT_EQ(json.front(), '[');
  EXPECT_NE(json.find(R"("choices": ["error", "warn", "info", "debug", "trace"])"),
            std::string::npos);
}

// README.md documents every switch and no switch that does not exist.
TEST(Info, ReadmeListsExactlyTheSwitches) {
  const char* readme = std::getenv("TEST_README_PATH");
  ASSERT_NE(readme, nullptr) << "set by meson";
  std::ifstream in(readme);
  ASSERT_TRUE(in) << readme;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  for (const config::Spec& s : config::all_switches()) {
    EXPECT_NE(text.find("`MLXA2A_" + std::string(s.name) + "`"), std::string::npos)
        << "README.md does not document MLXA2A_" << s.name;
  }
  for (std::size_t p = text.find("`MLXA2A_"); p != std::string::npos;
       p = text.find("`MLXA2A_", p + 1)) {
    const std::size_t end = text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", p + 8);
    const std::string name = text.substr(p + 8, end - p - 8);
    if (name.empty()) continue;  // "`MLXA2A_*`" means all of them
    Registry r(config::all_switches());
    EXPECT_NE(r.find(name), nullptr) << "README.md mentions unknown MLXA2A_" << name;
  }
}

// MLXA2A_COLL_STATS' help (mlxa2a_info, mlxa2a(7)) and README row name every
// per-rank line it adds besides the path counts (core/mpi/runtime.cc).
TEST(Info, CollStatsHelpNamesItsStatsLines) {
  std::string_view help;
  for (const config::Spec& s : config::all_switches()) {
    if (s.name == std::string_view("COLL_STATS")) help = s.description;
  }
  ASSERT_FALSE(help.empty());
  const char* readme = std::getenv("TEST_README_PATH");
  ASSERT_NE(readme, nullptr) << "set by meson";
  std::ifstream in(readme);
  std::string row;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `MLXA2A_COLL_STATS`", 0) == 0) row = line;
  }
  ASSERT_FALSE(row.empty()) << "README.md has no MLXA2A_COLL_STATS row";
  for (const char* stats_line : {"stats waits:", "stats phases:"}) {
    EXPECT_NE(help.find(stats_line), std::string_view::npos) << stats_line;
    EXPECT_NE(row.find(stats_line), std::string::npos) << stats_line;
  }
}

}  // namespace
}  // namespace mlxa2a::core::info
