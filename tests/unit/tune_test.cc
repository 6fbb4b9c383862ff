// Measured selection, MPI-free parts (core/tune): samples, medians and
// quartiles, the margin rule, the tune file and the test clock, plus the
// switches that configure them. The per-class state machine (trial order,
// early stop, revisions, skewed ranks): class_tuner_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/config/registry.h"
#include "core/config/switches.h"
#include "core/info/render.h"
#include "core/tune/size_class.h"
#include "core/config/fake_clock.h"
#include "core/tune/trials.h"
#include "core/tune/tune_file.h"

namespace mlxa2a::core::tune {
namespace {

using config::FakeClock;

using C = Route;

TEST(Tuning, SizeClassesArePowersOfTwo) {
  EXPECT_EQ(size_class(1), 0u);
  EXPECT_EQ(size_class(2), 1u);
  EXPECT_EQ(size_class(3), 1u);
  EXPECT_EQ(size_class(4096), 12u);
  EXPECT_EQ(size_class(8191), 12u);
  EXPECT_EQ(size_class(UINT64_MAX), 63u);
}

TEST(Tuning, CandidateNamesRoundTrip) {
  for (std::size_t i = 0; i < kConcreteRoutes; ++i) {
    const auto c = static_cast<Route>(i);
    EXPECT_EQ(concrete_route_from_string(to_string(c)), c);
  }
  EXPECT_FALSE(concrete_route_from_string("shm"));
}

TEST(Tuning, CheapClassesTakeMoreSamples) {
  EXPECT_EQ(samples_for(0, 3), 12u);
  EXPECT_EQ(samples_for(12, 3), 12u);  // 4 KiB .. 8 KiB - 1
  EXPECT_EQ(samples_for(13, 3), 3u);   // 8 KiB
  EXPECT_EQ(samples_for(40, 3), 3u);
  EXPECT_EQ(samples_for(0, 1), 4u);
  EXPECT_EQ(samples_for(0, 30), 64u);  // capped
  EXPECT_EQ(samples_for(20, 64), 64u);
}

TEST(Tuning, MedianIgnoresOneOutlier) {
  EXPECT_EQ(median({3, 1000, 2}), 3);
  EXPECT_EQ(median({5}), 5);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(Tuning, PmpiStaysUnlessBeatenByTheMargin) {
  const C list[] = {C::copy, C::pmpi, C::cma};
  const double pmpi_wins[] = {4.0, 3.0, 5.0};
  EXPECT_EQ(list[choose(list, pmpi_wins)], C::pmpi);
  const double barely[] = {9.6, 10.0, 9.7};  // 4% faster: not enough
  EXPECT_EQ(list[choose(list, barely)], C::pmpi);
  const double enough[] = {9.5, 10.0, 9.7};  // exactly 5%
  EXPECT_EQ(list[choose(list, enough)], C::copy);
  const double cma_wins[] = {5.0, 10.0, 2.0};
  EXPECT_EQ(list[choose(list, cma_wins)], C::cma);
  const double tie[] = {2.0, 10.0, 2.0};  // the earlier (fixed rules' choice) wins ties
  EXPECT_EQ(list[choose(list, tie)], C::copy);
  const C no_pmpi[] = {C::line, C::copy};
  const double close[] = {1.0, 0.99};
  EXPECT_EQ(no_pmpi[choose(no_pmpi, close)], C::copy);
}

TEST(Tuning, QuantilesTakeTheNearestRank) {
  EXPECT_EQ(quantile({2, 1}, 0.25), 1);
  EXPECT_EQ(quantile({2, 1}, 0.75), 2);
  EXPECT_EQ(quantile({3, 1, 2}, 0.25), 1);  // halves away from the median
  EXPECT_EQ(quantile({3, 1, 2}, 0.75), 3);
  EXPECT_EQ(quantile({4, 1, 3, 2}, 0.25), 2);
  EXPECT_EQ(quantile({4, 1, 3, 2}, 0.75), 3);
  EXPECT_EQ(quantile({8, 1, 7, 2, 6, 3, 5, 4}, 0.25), 3);
  EXPECT_EQ(quantile({8, 1, 7, 2, 6, 3, 5, 4}, 0.75), 6);
  EXPECT_EQ(quantile({5}, 0.75), 5);
}

TEST(Tuning, FakeClockPerRankOverridesEveryRank) {
  const auto c = FakeClock::parse(" pmpi=5, copy=2 ; 1:copy=50 ;pmpi=7");
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(*c->seconds(0, C::copy), 2e-6);
  EXPECT_DOUBLE_EQ(*c->seconds(1, C::copy), 50e-6);
  EXPECT_DOUBLE_EQ(*c->seconds(1, C::pmpi), 7e-6);  // later groups win
  EXPECT_FALSE(c->seconds(0, C::line));               // timed for real
  EXPECT_TRUE(FakeClock::parse("")->empty());
}

TEST(Tuning, FakeClockRejectsBadText) {
  for (const char* bad : {"copy", "shm=1", "copy=-1", "copy=x", "-1:copy=1", "1:", "x:copy=1",
                          "copy=1,,pmpi=2"}) {
    EXPECT_FALSE(FakeClock::parse(bad)) << bad;
  }
}

Layout layout(int ranks, bool oversubscribed = false) {
  return Layout{"ompi", ranks, 1, ranks, oversubscribed};
}

TEST(Tuning, TuneFileRoundTrips) {
  TuneFile f;
  f.set(layout(4, true), 0, C::line);
  f.set(layout(4, true), 10, C::copy);
  f.set(Layout{"mpich", 6, 3, 2, false}, 20, C::hier);
  f.set(layout(4, true), 10, C::pmpi);  // replaces
  EXPECT_EQ(f.entries().size(), 3u);
  std::string error;
  const auto back = TuneFile::parse(f.format(), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, f);
  EXPECT_EQ(back->lookup(layout(4, true), 10), C::pmpi);
  EXPECT_FALSE(back->lookup(layout(4, false), 10));  // another layout
  EXPECT_FALSE(back->lookup(layout(4, true), 11));

  char name[] = "/tmp/mlxa2a-tune-test-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(f.save(name, &error)) << error;
  const auto loaded = TuneFile::load(name, &error);
  std::remove(name);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(*loaded, f);
  const auto missing = TuneFile::load(std::string(name) + ".none", &error);
  ASSERT_TRUE(missing);
  EXPECT_TRUE(missing->entries().empty());
}

TEST(Tuning, TuneFileErrorsNameTheLine) {
  const std::string good = "mpi=ompi ranks=4 nodes=1 ranks_per_node=4 oversubscribed=0 ";
  const std::pair<std::string, const char*> bad[] = {
      {good + "bytes=1K path=shm", "path must be"},
      {good + "bytes=1000 path=copy", "power of two"},
      {good + "bytes=0 path=copy", "power of two"},
      {good + "path=copy", "bytes missing"},
      {good + "bytes=1K path=copy speed=9", "unknown field"},
      {good + "bytes=1K bytes=2K path=copy", "given twice"},
      {"mpi=lam ranks=4 nodes=1 ranks_per_node=4 oversubscribed=0 bytes=1K path=copy", "mpi must"},
      {"mpi=ompi ranks=4 nodes=5 ranks_per_node=4 oversubscribed=0 bytes=1K path=copy", "ranks"},
      {"mpi=ompi ranks=4 nodes=1 ranks_per_node=4 oversubscribed=2 bytes=1K path=copy", "0 or 1"},
  };
  for (const auto& [text, why] : bad) {
    std::string error;
    EXPECT_FALSE(TuneFile::parse("# header\n\n" + text + "\n", &error)) << text;
    EXPECT_NE(error.find("line 3: "), std::string::npos) << error;
    EXPECT_NE(error.find(why), std::string::npos) << error;
  }
  std::string error;
  const auto ok = TuneFile::parse(good + "bytes=64K path=cma  # measured\n", &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(ok->lookup(layout(4), 16), C::cma);
}

TEST(Tuning, SwitchesRejectBadValues) {
  using config::Registry;
  Registry r(config::all_switches());
  r.load({{"MLXA2A_TUNE_SAMPLES", "65"}, {"MLXA2A_DEBUG_TUNE_TIMES", "copy=fast"}});
  EXPECT_EQ(r.warnings().size(), 2u);
  const config::Settings s = config::settings_from(r);
  EXPECT_EQ(s.tune_samples, 3u);  // the default
  EXPECT_EQ(s.debug_tune_times, "");
  Registry neg(config::all_switches());
  neg.load({{"MLXA2A_TUNE_SAMPLES", "-1"}});
  EXPECT_EQ(neg.warnings().size(), 1u);
  Registry good(config::all_switches());
  good.load({{"MLXA2A_TUNE_SAMPLES", "0"}, {"MLXA2A_TUNE_FILE", "/tmp/t"},
             {"MLXA2A_DEBUG_TUNE_TIMES", "pmpi=1;2:hier=3"}});
  EXPECT_TRUE(good.warnings().empty());
  const config::Settings g = config::settings_from(good);
  EXPECT_EQ(g.tune_samples, 0u);
  EXPECT_EQ(g.tune_file, "/tmp/t");
  EXPECT_EQ(g.debug_tune_times, "pmpi=1;2:hier=3");
}

// MLXA2A_TUNE_FILE's bad values are files that cannot be used: mlxa2a_info
// says why (the runtime warns and runs the trials instead).
TEST(Tuning, InfoListsATuneFileOrSaysWhyNot) {
  char name[] = "/tmp/mlxa2a-tune-info-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  close(fd);
  TuneFile f;
  f.set(layout(4, true), 10, C::copy);
  std::string error;
  ASSERT_TRUE(f.save(name, &error)) << error;
  config::Registry r(config::all_switches());
  r.load({{"MLXA2A_TUNE_FILE", name}});
  const std::string listed = info::render_tune_file(r);
  EXPECT_NE(listed.find("ompi ranks=4 nodes=1 ranks_per_node=4 oversubscribed: 1K-2K -> copy"),
            std::string::npos)
      << listed;
  std::ofstream(name) << "mpi=ompi ranks=4\n";
  const std::string broken = info::render_tune_file(r);
  std::remove(name);
  EXPECT_NE(broken.find("cannot be used"), std::string::npos) << broken;
  EXPECT_NE(broken.find("line 1: field nodes missing"), std::string::npos) << broken;
  config::Registry none(config::all_switches());
  none.load({});
  EXPECT_EQ(info::render_tune_file(none), "");
}

}  // namespace
}  // namespace mlxa2a::core::tune
