#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/config/parse.h"
#include "core/config/registry.h"
#include "core/config/switches.h"

namespace mlxa2a::core::config {
namespace {

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/mlxa2a-registry-test-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    path_ = name;
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool has_warning(const Registry& r, std::string_view needle) {
  for (const std::string& w : r.warnings()) {
    if (w.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(Registry, DefaultsWithoutEnvironment) {
  Registry r(all_switches());
  r.load({});
  EXPECT_TRUE(r.warnings().empty());
  for (const auto& e : r.entries()) {
    EXPECT_EQ(e.source, Source::Default) << e.spec->name;
  }
  EXPECT_TRUE(r.get_bool("ENABLE"));
  EXPECT_EQ(r.get_size("MLXA2A_RCACHE_ALIGN"), 16u);
  EXPECT_EQ(r.get_string("COLL_TRACE"), "none");
}

TEST(Registry, EnvironmentOverridesFileOverridesDefault) {
  TempFile f("# comment\n\nMLXA2A_LOG_LEVEL = debug\nRCACHE_ALIGN=64\nMLXA2A_TUNE=\"0-1K:shm\"\n");
  Registry r(all_switches());
  r.load({{"MLXA2A_CONFIG_FILE", f.path()}, {"MLXA2A_LOG_LEVEL", "info"}});
  EXPECT_TRUE(r.warnings().empty()) << r.warnings().front();
  EXPECT_EQ(r.get_string("LOG_LEVEL"), "info");
  EXPECT_EQ(r.find("LOG_LEVEL")->source, Source::Env);
  EXPECT_EQ(r.get_size("RCACHE_ALIGN"), 64u);
  EXPECT_EQ(r.find("RCACHE_ALIGN")->source, Source::File);
  EXPECT_EQ(r.find("RCACHE_ALIGN")->origin, f.path() + ":4");
  EXPECT_EQ(r.find("TUNE")->text, "0-1K:shm");
  EXPECT_EQ(r.find("ENABLE")->source, Source::Default);
}

TEST(Registry, BadValueWarnsOnceAndKeepsTheLowerSource) {
  TempFile f("MLXA2A_RCACHE_ALIGN = 64\n");
  Registry r(all_switches());
  r.load({{"MLXA2A_CONFIG_FILE", f.path()}, {"MLXA2A_RCACHE_ALIGN", "100"},
          {"MLXA2A_ENABLE", "perhaps"}});
  ASSERT_EQ(r.warnings().size(), 2u);
  EXPECT_TRUE(has_warning(r, "MLXA2A_RCACHE_ALIGN='100' (env) is not valid: expected a power of two"));
  EXPECT_TRUE(has_warning(r, "using 64 (file)"));
  EXPECT_TRUE(has_warning(r, "MLXA2A_ENABLE='perhaps'"));
  EXPECT_EQ(r.get_size("RCACHE_ALIGN"), 64u);
  EXPECT_TRUE(r.get_bool("ENABLE"));
  EXPECT_EQ(r.find("ENABLE")->source, Source::Default);
}

TEST(Registry, ZeroCopyThresholdRejectsBadSizes) {
  for (const char* bad : {"-1", "64Q", "lots"}) {
    Registry r(all_switches());
    r.load({{"MLXA2A_NET_ZCOPY_THRESHOLD", bad}});
    EXPECT_TRUE(has_warning(r, "MLXA2A_NET_ZCOPY_THRESHOLD=")) << bad;
    EXPECT_EQ(r.get_size("NET_ZCOPY_THRESHOLD"), 0u) << bad;
  }
  Registry r(all_switches());
  r.load({{"MLXA2A_NET_ZCOPY_THRESHOLD", "1"}});
  EXPECT_TRUE(r.warnings().empty());
  EXPECT_EQ(settings_from(r).net.zcopy_threshold, 1u);
}

TEST(Registry, NetPipelineRejectsBadValues) {
  for (const char* bad : {"2", "maybe", "-1", "on-ish"}) {
    Registry r(all_switches());
    r.load({{"MLXA2A_NET_PIPELINE", bad}});
    EXPECT_TRUE(has_warning(r, "MLXA2A_NET_PIPELINE=")) << bad;
    EXPECT_EQ(settings_from(r).net.pipeline, true) << bad;  // the default stands
  }
  Registry r(all_switches());
  r.load({{"MLXA2A_NET_PIPELINE", "n"}});
  EXPECT_TRUE(r.warnings().empty());
  EXPECT_FALSE(settings_from(r).net.pipeline);
}

// The switch structs a row may store into (Spec::store): each row's value
// must reach its own field and nothing else in them.
struct Parts {
  NetSwitches net;
  ShmSwitches shm;
  RcacheSwitches rcache;
  friend bool operator==(const Parts&, const Parts&) = default;
};

Parts parts_from(const Environment& env) {
  Registry r(all_switches());
  r.load(env);
  EXPECT_TRUE(r.warnings().empty()) << r.warnings().front();
  const Settings s = settings_from(r);
  return {s.net, s.shm, s.rcache};
}

// Each case is "NAME=value" (without MLXA2A_) and what it changes in Parts.
using Case = std::pair<const char*, void (*)(Parts&)>;

void expect_each_row_reaches_its_field(std::string_view prefix, std::span<const Case> cases) {
  std::size_t rows = 0;
  for (const Spec& spec : all_switches()) {
    if (!spec.name.starts_with(prefix)) continue;
    ++rows;
    EXPECT_NE(spec.store, nullptr) << spec.name;
  }
  EXPECT_EQ(rows, cases.size()) << prefix << ": a new row needs a case here";
  for (const auto& [text, expect] : cases) {
    const std::string t(text);
    const std::size_t eq = t.find('=');
    Parts want;
    expect(want);
    EXPECT_TRUE(parts_from({{"MLXA2A_" + t.substr(0, eq), t.substr(eq + 1)}}) == want) << text;
  }
}

TEST(Registry, NetSwitchDefaultsAreTheRowsDefaults) {
  EXPECT_TRUE(parts_from({}).net == NetSwitches{});
}

TEST(Registry, ShmSwitchDefaultsAreTheRowsDefaults) {
  EXPECT_TRUE(parts_from({}).shm == ShmSwitches{});
}

TEST(Registry, RcacheSwitchDefaultsAreTheRowsDefaults) {
  EXPECT_TRUE(parts_from({}).rcache == RcacheSwitches{});
}

TEST(Registry, EveryNetSwitchReachesItsField) {
  const Case cases[] = {
      {"NET_DEVICES=mlx5_3:2", [](Parts& p) { p.net.devices = {{"mlx5_3", 2}}; }},
      {"NET_ZCOPY_THRESHOLD=4K", [](Parts& p) { p.net.zcopy_threshold = 4096; }},
      {"NET_PIPELINE=n", [](Parts& p) { p.net.pipeline = false; }},
      {"NET_PMPI_PIECE=16K", [](Parts& p) { p.net.pmpi_piece = 16384; }},
      {"NET_PMPI_SLOT_SIZE=1M", [](Parts& p) { p.net.pmpi_slot_size = 1 << 20; }},
      {"NET_PMPI_STAGE_LIMIT=0", [](Parts& p) { p.net.pmpi_stage_limit = 0; }},
      {"NET_GID_INDEX=3", [](Parts& p) { p.net.gid_index = 3; }},
      {"NET_TIMEOUT=86400000", [](Parts& p) { p.net.timeout_ms = 86400000; }},
      {"NET_KEEPALIVE=500", [](Parts& p) { p.net.keepalive_ms = 500; }},
      {"NET_QP_TIMEOUT=31", [](Parts& p) { p.net.qp_timeout = 31; }},
      {"NET_RETRY_COUNT=0", [](Parts& p) { p.net.retry_count = 0; }},
      {"NET_RC_QP_BUDGET=64", [](Parts& p) { p.net.rc_qp_budget = 64; }},
      {"NET_TRAFFIC_CLASS=255", [](Parts& p) { p.net.traffic_class = 255; }},
      {"NET_SL=15", [](Parts& p) { p.net.service_level = 15; }},
      {"NET_PKEY=0x8001", [](Parts& p) { p.net.pkey = 0x8001; }},
      {"NET_VERBS_LIBRARY=/x/libibverbs.so", [](Parts& p) { p.net.verbs_library = "/x/libibverbs.so"; }},
      {"NET_INLINE=0", [](Parts& p) { p.net.inline_ask = 0; }},
      {"NET_RELAXED_ORDERING=n", [](Parts& p) { p.net.relaxed_ordering = false; }},
      {"NET_HUGEPAGES=thp", [](Parts& p) { p.net.hugepages = "thp"; }},
      {"NET_STRIPES=4", [](Parts& p) { p.net.stripes = 4; }},
      {"NET_STRIPE_MIN=64K", [](Parts& p) { p.net.stripe_min = 65536; }},
  };
  expect_each_row_reaches_its_field("NET_", cases);
}

TEST(Registry, EveryShmSwitchReachesItsField) {
  const Case cases[] = {
      {"SHM_CMA_THRESHOLD=1M", [](Parts& p) { p.shm.cma_threshold = 1 << 20; }},
      {"SHM_CMA_THRESHOLD_OVERSUBSCRIBED=8K", [](Parts& p) { p.shm.cma_threshold_oversubscribed = 8192; }},
      // Set alone, it is the PMPI leaders' slot too (the test below).
      {"SHM_SLOT_SIZE=1G", [](Parts& p) { p.shm.slot_size = p.net.pmpi_slot_size = 1 << 30; }},
      {"SHM_SLOT_SIZE_OVERSUBSCRIBED=64K", [](Parts& p) { p.shm.slot_size_oversubscribed = 65536; }},
      {"SHM_POOL=64", [](Parts& p) { p.shm.pool = 64; }},
  };
  expect_each_row_reaches_its_field("SHM_", cases);
}

TEST(Registry, EveryRcacheSwitchReachesItsField) {
  const Case cases[] = {
      {"RCACHE_ALIGN=4K", [](Parts& p) { p.rcache.align = 4096; }},
      {"RCACHE_MAX_REGIONS=1", [](Parts& p) { p.rcache.max_regions = 1; }},
      {"RCACHE_MAX_BYTES=inf", [](Parts& p) { p.rcache.max_bytes = kSizeInfinite; }},
      {"RCACHE_INVALIDATION=strict", [](Parts& p) { p.rcache.invalidation = "strict"; }},
  };
  expect_each_row_reaches_its_field("RCACHE_", cases);
}

// The staging slot of multi-node teams: RDMA leaders take SHM_SLOT_SIZE,
// PMPI leaders NET_PMPI_SLOT_SIZE (512K) - unless the user set only
// SHM_SLOT_SIZE (environment or file), which then holds for both.
TEST(Registry, AnExplicitShmSlotSizeIsThePmpiSlotUnlessThatIsSetToo) {
  auto slots = [](const Environment& env) {
    Registry r(all_switches());
    r.load(env);
    const Settings s = settings_from(r);
    return std::make_pair(s.shm.slot_size, s.net.pmpi_slot_size);
  };
  using Slots = std::pair<std::uint64_t, std::uint64_t>;
  EXPECT_EQ(slots({}), Slots(131072, 524288));
  EXPECT_EQ(slots({{"MLXA2A_SHM_SLOT_SIZE", "16K"}}), Slots(16384, 16384));
  EXPECT_EQ(slots({{"MLXA2A_SHM_SLOT_SIZE", "128K"}}), Slots(131072, 131072));
  EXPECT_EQ(slots({{"MLXA2A_SHM_SLOT_SIZE", "16K"}, {"MLXA2A_NET_PMPI_SLOT_SIZE", "256K"}}),
            Slots(16384, 262144));
  EXPECT_EQ(slots({{"MLXA2A_NET_PMPI_SLOT_SIZE", "1M"}}), Slots(131072, 1 << 20));
  // A value refused with a warning sets nothing.
  EXPECT_EQ(slots({{"MLXA2A_SHM_SLOT_SIZE", "inf"}}), Slots(131072, 524288));
  TempFile f("MLXA2A_SHM_SLOT_SIZE = 32K\n");
  EXPECT_EQ(slots({{"MLXA2A_CONFIG_FILE", f.path()}}), Slots(32768, 32768));
}

// What mlxa2a_info prints is the registry's entry: it shows the value that
// applies and where it came from, not the unused default.
TEST(Registry, AFollowedSwitchShowsTheValueThatAppliesAndItsOrigin) {
  Registry r(all_switches());
  r.load({{"MLXA2A_SHM_SLOT_SIZE", "16K"}});
  const Registry::Entry* e = r.find("NET_PMPI_SLOT_SIZE");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->text, "16K");
  EXPECT_EQ(e->source, Source::Env);
  EXPECT_EQ(e->origin, "MLXA2A_SHM_SLOT_SIZE (env)");
  r.load({{"MLXA2A_SHM_SLOT_SIZE", "16K"}, {"MLXA2A_NET_PMPI_SLOT_SIZE", "1M"}});
  EXPECT_EQ(r.find("NET_PMPI_SLOT_SIZE")->text, "1M");
  EXPECT_EQ(r.find("NET_PMPI_SLOT_SIZE")->origin, "env");
  r.load({});
  EXPECT_EQ(r.find("NET_PMPI_SLOT_SIZE")->source, Source::Default);
  EXPECT_EQ(r.find("NET_PMPI_SLOT_SIZE")->text, "512K");
}

TEST(Registry, UnknownNamesAreWarnedWithASuggestion) {
  Registry r(all_switches());
  r.load({{"MLXA2A_COLL_TRACES", "info"}, {"MLXA2A_WHATEVER", "1"}});
  ASSERT_EQ(r.warnings().size(), 2u);
  EXPECT_TRUE(has_warning(r, "unknown variable MLXA2A_COLL_TRACES in the environment"));
  EXPECT_TRUE(has_warning(r, "did you mean MLXA2A_COLL_TRACE?"));
  EXPECT_TRUE(has_warning(r, "unknown variable MLXA2A_WHATEVER"));
  EXPECT_FALSE(has_warning(r, "WHATEVER in the environment is ignored; did you mean"));
}

TEST(Registry, FileErrorsNameTheLine) {
  TempFile f("MLXA2A_ENABLE = n\nthis is not an assignment\nMLXA2A_NOPE = 1\nMLXA2A_CONFIG_FILE = x\n");
  Registry r(all_switches());
  r.load({{"MLXA2A_CONFIG_FILE", f.path()}});
  EXPECT_FALSE(r.get_bool("ENABLE"));
  EXPECT_TRUE(has_warning(r, f.path() + ":2: expected MLXA2A_NAME = VALUE"));
  EXPECT_TRUE(has_warning(r, "unknown variable MLXA2A_NOPE in " + f.path() + ":3"));
  EXPECT_TRUE(has_warning(r, f.path() + ":4: MLXA2A_CONFIG_FILE can only be set in the environment"));
  EXPECT_EQ(r.warnings().size(), 3u);
}

TEST(Registry, MissingFileIsAWarningNotAFailure) {
  Registry r(all_switches());
  r.load({{"MLXA2A_CONFIG_FILE", "/nonexistent/mlxa2a.conf"}});
  EXPECT_TRUE(has_warning(r, "/nonexistent/mlxa2a.conf: cannot open"));
  EXPECT_TRUE(r.get_bool("ENABLE"));
}

TEST(Registry, AllEqualHashUsesCanonicalValues) {
  Registry a(all_switches()), b(all_switches()), c(all_switches()), d(all_switches());
  a.load({{"MLXA2A_TUNE", "0-4096:shm"}});
  b.load({{"MLXA2A_TUNE", "0-4K:shm"}});
  c.load({{"MLXA2A_TUNE", "0-8K:shm"}});
  d.load({{"MLXA2A_TUNE", "0-4K:shm"}, {"MLXA2A_LOG_LEVEL", "debug"}});  // local switch
  EXPECT_EQ(a.all_equal_hash(), b.all_equal_hash());
  EXPECT_NE(a.all_equal_hash(), c.all_equal_hash());
  EXPECT_EQ(b.all_equal_hash(), d.all_equal_hash());
  EXPECT_NE(c.all_equal_summary().find("MLXA2A_TUNE=0-8K:shm"), std::string::npos);
  EXPECT_EQ(c.all_equal_summary().find("LOG_LEVEL"), std::string::npos);
}

TEST(Registry, SettingsSnapshotIsTyped) {
  Registry r(all_switches());
  r.load({{"MLXA2A_ENABLE", "off"},
          {"MLXA2A_LOG_LEVEL", "trace"},
          {"MLXA2A_COLL_TRACE", "info"},
          {"MLXA2A_NET_DEVICES", "mlx5_2:1"},
          {"MLXA2A_RCACHE_MAX_BYTES", "1G"}});
  const Settings s = settings_from(r);
  EXPECT_FALSE(s.enable);
  EXPECT_EQ(s.log_level, log::Level::Trace);
  EXPECT_EQ(s.coll_trace, CollTrace::Info);
  ASSERT_EQ(s.net.devices.size(), 1u);
  EXPECT_EQ(s.net.devices[0].device, "mlx5_2");
  EXPECT_EQ(s.rcache.max_bytes, 1ull << 30);
}

TEST(Registry, SetAtRunTimeParsesAndKeepsTheOldValueOnError) {
  Registry r(all_switches());
  r.load({{"MLXA2A_COLL_TRACE", "info"}});
  std::string why;
  ASSERT_TRUE(r.set("MLXA2A_COLL_TRACE", "debug", "MPI_T", &why)) << why;
  EXPECT_EQ(r.get_string("COLL_TRACE"), "debug");
  EXPECT_EQ(r.find("COLL_TRACE")->origin, "MPI_T");
  EXPECT_FALSE(r.set("COLL_TRACE", "loud", "MPI_T", &why));
  EXPECT_NE(why.find("expected"), std::string::npos) << why;
  EXPECT_EQ(r.get_string("COLL_TRACE"), "debug");
  EXPECT_TRUE(r.warnings().empty());  // a refused write is the caller's to report
  EXPECT_FALSE(r.set("NO_SUCH_SWITCH", "1", "MPI_T", &why));
  EXPECT_NE(why.find("NO_SUCH_SWITCH"), std::string::npos) << why;
}

}  // namespace
}  // namespace mlxa2a::core::config
