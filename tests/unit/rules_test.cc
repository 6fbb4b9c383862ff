#include <gtest/gtest.h>

#include <string>

#include "core/config/rules.h"
#include "core/plan/plan.h"
#include "core/selection.h"

namespace mlxa2a::core::config::rules {
namespace {

Table parse_ok(std::string_view text) {
  std::string error;
  auto t = Table::parse(text, &error);
  EXPECT_TRUE(t) << text << ": " << error;
  return t ? *t : Table{};
}

TEST(Tune, DefaultIsAutoEverywhere) {
  Table t;
  EXPECT_EQ(t.lookup(0), Route::auto_);
  EXPECT_EQ(t.lookup(UINT64_MAX), Route::auto_);
  EXPECT_EQ(t, parse_ok("auto"));
  EXPECT_EQ(t.format(), "auto");
}

TEST(Tune, RangesAreHalfOpen) {
  Table t = parse_ok("0-4K:shm#4K-inf:pmpi");
  EXPECT_EQ(t.lookup(0), Route::shm);
  EXPECT_EQ(t.lookup(4095), Route::shm);
  EXPECT_EQ(t.lookup(4096), Route::pmpi);
  EXPECT_EQ(t.lookup(UINT64_MAX), Route::pmpi);
}

TEST(Tune, LaterRulesWinAndGapsAreAuto) {
  Table t = parse_ok("pmpi#16-128:shm#64-100:rdma");
  EXPECT_EQ(t.lookup(15), Route::pmpi);
  EXPECT_EQ(t.lookup(16), Route::shm);
  EXPECT_EQ(t.lookup(64), Route::rdma);
  EXPECT_EQ(t.lookup(99), Route::rdma);
  EXPECT_EQ(t.lookup(100), Route::shm);
  EXPECT_EQ(t.lookup(128), Route::pmpi);

  Table gap = parse_ok("1K-2K:pmpi");
  EXPECT_EQ(gap.lookup(0), Route::auto_);
  EXPECT_EQ(gap.lookup(1024), Route::pmpi);
  EXPECT_EQ(gap.lookup(2048), Route::auto_);
}

TEST(Tune, FormatRoundTrips) {
  for (const char* text : {"0-4K:shm#4K-inf:pmpi", "pmpi", "16-1M:rdma#shm", " 0 - 64 : shm "}) {
    Table t = parse_ok(text);
    EXPECT_EQ(parse_ok(t.format()), t) << text << " -> " << t.format();
  }
}

TEST(Tune, RejectsMalformedRules) {
  for (const char* text : {"", "#", "fast", "0-4K", "0-4K:", "4K:shm", "4K-0:shm", "4K-4K:shm",
                           "inf-inf:shm", "0-4Q:shm", "0-4K:shm#", "x-1:shm", "0-4K:shm:pmpi"}) {
    std::string error;
    EXPECT_FALSE(Table::parse(text, &error)) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
}

struct Fixed {
  Route path;  // the route's family: pmpi, shm or rdma
  const char* reason;
};

// The fixed rules, asked through plan::decide for a set-up team whose
// engine compares no sizes and which measures nothing.
Fixed select(std::uint64_t bytes, const Table& table, const Capabilities& caps) {
  plan::Query q;
  q.bytes = bytes;
  q.tune = &table;
  q.measure = false;
  q.team = plan::Team::ready;
  q.caps = caps;
  q.engine = true;
  q.engine_route = caps.shm ? Route::copy : caps.rdma ? Route::rdma : Route::hier;
  q.tuning = plan::Tuning::off;
  const plan::Plan a = plan::decide(q);
  EXPECT_TRUE(a.serve == plan::Serve::engine || a.serve == plan::Serve::pmpi);
  return {family(a.route), a.reason};
}

TEST(Selection, NeverPicksAnEngineTheTeamLacks) {
  const Capabilities none{}, shm{true, false}, rdma{false, true};
  EXPECT_EQ(select(8, Table{}, none).path, Route::pmpi);
  EXPECT_EQ(select(8, Table{}, shm).path, Route::shm);
  EXPECT_EQ(select(8, Table{}, rdma).path, Route::rdma);
  EXPECT_EQ(select(8, parse_ok("shm"), rdma).path, Route::pmpi);
  EXPECT_EQ(select(8, parse_ok("rdma"), shm).path, Route::pmpi);
  EXPECT_EQ(select(8, parse_ok("pmpi"), shm).path, Route::pmpi);
  EXPECT_EQ(select(8, parse_ok("0-4:pmpi"), shm).path, Route::shm);
  // Why a team without engines falls through is traced; tests match on it.
  const Capabilities multi{false, false, 2}, failed{false, false, 1};
  EXPECT_EQ(select(8, Table{}, multi).path, Route::pmpi);
  EXPECT_NE(std::string(select(8, Table{}, multi).reason).find("hierarchical set-up failed"),
            std::string::npos);
  EXPECT_NE(std::string(select(8, parse_ok("shm"), multi).reason).find("set-up failed"),
            std::string::npos);
  EXPECT_NE(std::string(select(8, Table{}, failed).reason).find("failed"), std::string::npos);
  // A layout limit sends auto to PMPI from that size; an explicit shm rule wins.
  Capabilities limited = shm;
  limited.shm_auto_from = 256;
  limited.shm_auto_limit = 512 * 1024;
  EXPECT_EQ(select(255, Table{}, limited).path, Route::pmpi);
  EXPECT_EQ(select(255, parse_ok("shm"), limited).path, Route::shm);
  EXPECT_EQ(select(256, Table{}, limited).path, Route::shm);
  EXPECT_EQ(select(512 * 1024 - 1, Table{}, limited).path, Route::shm);
  EXPECT_EQ(select(512 * 1024, Table{}, limited).path, Route::pmpi);
  EXPECT_EQ(select(512 * 1024, parse_ok("shm"), limited).path, Route::shm);
  // Oversubscribed Open MPI: auto falls through once a rank moves 2 MiB in
  // all (bytes per peer * ranks); MPICH, or a node with a core per rank, never.
  Capabilities over4 = shm, over8 = shm, mpich = shm, cores = shm;
  set_auto_ranges(over4, 4, true, true);
  set_auto_ranges(over8, 8, true, true);
  set_auto_ranges(mpich, 8, true, false);
  set_auto_ranges(cores, 8, false, true);
  EXPECT_EQ(select(512 * 1024 - 1, Table{}, over4).path, Route::shm);
  EXPECT_EQ(select(512 * 1024, Table{}, over4).path, Route::pmpi);
  EXPECT_EQ(select(256 * 1024 - 1, Table{}, over8).path, Route::shm);
  EXPECT_EQ(select(256 * 1024, Table{}, over8).path, Route::pmpi);
  EXPECT_EQ(select(256 * 1024, parse_ok("shm"), over8).path, Route::shm);
  EXPECT_EQ(select(std::uint64_t{1} << 30, Table{}, mpich).path, Route::shm);
  EXPECT_EQ(select(std::uint64_t{1} << 30, Table{}, cores).path, Route::shm);
  // A multi-node team with the hierarchical engine: auto below its limit, an
  // explicit shm rule at any size, and rdma wins when it is up.
  Capabilities hier{false, false, 3, true};
  hier.hier_auto_limit = 2048;
  EXPECT_EQ(select(1, Table{}, hier).path, Route::shm);
  EXPECT_EQ(select(2047, Table{}, hier).path, Route::shm);
  EXPECT_EQ(select(2048, Table{}, hier).path, Route::pmpi);
  EXPECT_NE(std::string(select(2048, Table{}, hier).reason).find("PMPI is faster"),
            std::string::npos);
  EXPECT_EQ(select(1 << 20, parse_ok("shm"), hier).path, Route::shm);
  Capabilities sparse = hier;  // about one rank per node: auto stays on PMPI
  sparse.hier_auto_limit = 0;
  EXPECT_EQ(select(1, Table{}, sparse).path, Route::pmpi);
  EXPECT_NE(std::string(select(1, Table{}, sparse).reason).find("nothing to aggregate"),
            std::string::npos);
  EXPECT_EQ(select(1, parse_ok("shm"), sparse).path, Route::shm);
  EXPECT_EQ(select(8, parse_ok("rdma"), hier).path, Route::pmpi);
  Capabilities both = hier;
  both.rdma = true;
  EXPECT_EQ(select(8, Table{}, both).path, Route::rdma);
  for (auto caps : {none, shm, rdma, multi, failed, limited, hier}) {
    EXPECT_NE(select(0, Table{}, caps).reason, nullptr);
    EXPECT_NE(select(0, Table{}, caps).path, Route::auto_);
  }
}

}  // namespace
}  // namespace mlxa2a::core::config::rules
