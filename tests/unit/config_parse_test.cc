#include <gtest/gtest.h>

#include "core/config/parse.h"
#include "core/config/switches.h"

namespace mlxa2a::core::config {
namespace {

TEST(ParseBool, AcceptsCommonSpellings) {
  for (const char* t : {"1", "y", "Y", "yes", "true", "TRUE", "on", " on "}) {
    EXPECT_EQ(parse_bool(t), true) << t;
  }
  for (const char* t : {"0", "n", "no", "false", "off", "Off"}) {
    EXPECT_EQ(parse_bool(t), false) << t;
  }
  for (const char* t : {"", "2", "yess", "enable", "-1"}) {
    EXPECT_FALSE(parse_bool(t).has_value()) << t;
  }
}

const Spec& spec_named(std::string_view name) {
  for (const Spec& s : all_switches()) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no switch " << name;
  return all_switches()[0];
}

// Issue 11: MLXA2A_SHM_SLOT_SIZE=inf (or >= 2^63) made the segment geometry
// wrap and the engine write past its segment. Sizes that shape segments have a
// finite maximum; inf stays accepted where it means "no limit" or "never".
TEST(ParseSize, SegmentSizesHaveAFiniteMaximum) {
  for (std::string_view name : {"SHM_SLOT_SIZE", "SHM_SLOT_SIZE_OVERSUBSCRIBED"}) {
    const Spec& s = spec_named(name);
    for (const char* bad : {"inf", "unlimited", "2G", "1073741825", "9223372036854775808",
                            "18446744073709551614", "0"}) {
      const ParseResult r = parse_value(s, bad);
      EXPECT_FALSE(r.value.has_value()) << name << "=" << bad;
      EXPECT_NE(r.accepted.find("1G"), std::string::npos) << name << "=" << bad << ": " << r.accepted;
    }
    for (const char* good : {"1", "4K", "1G", "1073741824"}) {
      EXPECT_TRUE(parse_value(s, good).value.has_value()) << name << "=" << good;
    }
  }
  for (std::string_view name : {"SHM_CMA_THRESHOLD", "SHM_CMA_THRESHOLD_OVERSUBSCRIBED",
                                "RCACHE_MAX_BYTES"}) {
    EXPECT_TRUE(parse_value(spec_named(name), "inf").value.has_value()) << name;
  }
}

// MLXA2A_SHM_POOL (issue 11, item 4): a count of idle segments, 0 to 64.
TEST(ParseInt, ShmPoolBounds) {
  const Spec& s = spec_named("SHM_POOL");
  for (const char* bad : {"-1", "65", "inf", "2K", "many", ""}) {
    EXPECT_FALSE(parse_value(s, bad).value.has_value()) << "SHM_POOL=" << bad;
  }
  for (const char* good : {"0", "1", "64"}) {
    EXPECT_TRUE(parse_value(s, good).value.has_value()) << "SHM_POOL=" << good;
  }
}

TEST(ParseInt, RejectsTrailingGarbageAndOverflow) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("+7"), 7);
  EXPECT_EQ(parse_int("-3"), -3);
  EXPECT_FALSE(parse_int("4K").has_value());
  // Hex for values written so (MLXA2A_NET_PKEY=0x8001).
  EXPECT_EQ(parse_int("0x8001"), 0x8001);
  EXPECT_EQ(parse_int("0XfFfF"), 0xffff);
  EXPECT_FALSE(parse_int("0x").has_value());
  EXPECT_FALSE(parse_int("0x12g").has_value());
  EXPECT_FALSE(parse_int("").has_value());
  EXPECT_FALSE(parse_int("1.5").has_value());
  EXPECT_FALSE(parse_int("99999999999999999999").has_value());
}

TEST(ParseSize, SuffixesAndInfinity) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("4K"), 4096u);
  EXPECT_EQ(parse_size("4k"), 4096u);
  EXPECT_EQ(parse_size("4KB"), 4096u);
  EXPECT_EQ(parse_size("1M"), 1u << 20);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size("inf"), kSizeInfinite);
  EXPECT_EQ(parse_size("INF"), kSizeInfinite);
  for (const char* t : {"", "K", "-1", "4X", "1.5K", "4 K B", "99999999999T"}) {
    EXPECT_FALSE(parse_size(t).has_value()) << t;
  }
}

TEST(ParseDevices, ListsWithOptionalPorts) {
  auto all = parse_devices("all");
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
  auto two = parse_devices("mlx5_0:1, mlx5_1");
  ASSERT_TRUE(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0], (Device{"mlx5_0", 1}));
  EXPECT_EQ((*two)[1], (Device{"mlx5_1", 0}));
  for (const char* t : {"", "mlx5_0:", "mlx5_0:0", "mlx5_0:256", ":1", "mlx5_0,,mlx5_1",
                        "mlx5 0", "mlx5_0:1,mlx5_0:1"}) {
    EXPECT_FALSE(parse_devices(t).has_value()) << t;
  }
}

Spec spec_of(std::string_view name) {
  for (const Spec& s : all_switches()) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << name;
  return {};
}

TEST(ParseValue, BadValuesSayWhatIsAccepted) {
  auto r = parse_value(spec_of("ENABLE"), "maybe");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.accepted.find("boolean"), std::string::npos);

  r = parse_value(spec_of("LOG_LEVEL"), "loud");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.accepted.find("error, warn, info, debug or trace"), std::string::npos) << r.accepted;

  r = parse_value(spec_of("RCACHE_MAX_REGIONS"), "0");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.accepted.find("from 1 to"), std::string::npos);

  r = parse_value(spec_of("RCACHE_ALIGN"), "24");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.accepted.find("power of two"), std::string::npos);
  r = parse_value(spec_of("RCACHE_ALIGN"), "8");
  EXPECT_FALSE(r.value);
  r = parse_value(spec_of("RCACHE_ALIGN"), "8K");
  EXPECT_FALSE(r.value);
  for (const char* ok : {"16", "64", "4K"}) {
    EXPECT_TRUE(parse_value(spec_of("RCACHE_ALIGN"), ok).value) << ok;
  }

  r = parse_value(spec_of("RCACHE_MAX_BYTES"), "0");
  EXPECT_FALSE(r.value);

  r = parse_value(spec_of("NET_DEVICES"), "mlx5_0:x");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.accepted.find("mlx5_0:1"), std::string::npos);

  // The RDMA switches' ranges: a QP timeout of 0 waits forever (no error
  // ever), retries are 3 bits, a GID index is -1 (find it) or a table index.
  for (const char* bad : {"0", "32", "-1", "x"}) {
    EXPECT_FALSE(parse_value(spec_of("NET_QP_TIMEOUT"), bad).value) << bad;
  }
  for (const char* bad : {"8", "-1"}) {
    EXPECT_FALSE(parse_value(spec_of("NET_RETRY_COUNT"), bad).value) << bad;
  }
  for (const char* bad : {"-2", "256", "auto"}) {
    EXPECT_FALSE(parse_value(spec_of("NET_GID_INDEX"), bad).value) << bad;
  }
  for (const char* bad : {"0", "-5", "1s"}) {
    EXPECT_FALSE(parse_value(spec_of("NET_TIMEOUT"), bad).value) << bad;
  }
  EXPECT_FALSE(parse_value(spec_of("NET_VERBS_LIBRARY"), "").value);
  EXPECT_TRUE(parse_value(spec_of("NET_QP_TIMEOUT"), "31").value);
  EXPECT_TRUE(parse_value(spec_of("NET_GID_INDEX"), "3").value);

  r = parse_value(spec_of("TUNE"), "0-4K:fast");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.accepted.find("0-4K:fast"), std::string::npos) << r.accepted;

  r = parse_value(spec_of("COLL_TRACE"), "INFO");  // enums are case-insensitive
  ASSERT_TRUE(r.value);
  EXPECT_EQ(std::get<std::string>(*r.value), "info");
}

TEST(Switches, EveryDefaultParsesAndRoundTrips) {
  for (const Spec& s : all_switches()) {
    auto r = parse_value(s, s.default_text);
    ASSERT_TRUE(r.value) << s.name << ": " << r.accepted;
    const std::string text = format_value(s, *r.value);
    auto again = parse_value(s, text);
    ASSERT_TRUE(again.value) << s.name << " canonical '" << text << "'";
    EXPECT_EQ(format_value(s, *again.value), text) << s.name;
    EXPECT_FALSE(s.description.empty()) << s.name;
  }
}

TEST(FormatSize, UsesLargestExactUnit) {
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(4096), "4K");
  EXPECT_EQ(format_size(3u << 20), "3M");
  EXPECT_EQ(format_size((1u << 20) + 1024), "1025K");
  EXPECT_EQ(format_size(kSizeInfinite), "inf");
}

}  // namespace
}  // namespace mlxa2a::core::config
