// core/stats/job_report: spreads over ranks, the gather's text form, and the
// rendered report's groups (docs/stats.md).
#include "core/stats/job_report.h"

#include <gtest/gtest.h>

namespace mlxa2a::core::stats {
namespace {

TEST(JobReport, SpreadTakesTheMiddleTwoForAnEvenCount) {
  const Spread odd = spread({5, 1, 3});
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.median, 3);
  EXPECT_EQ(odd.max, 5);
  EXPECT_EQ(spread({4, 1, 2, 10}).median, 3);
  EXPECT_EQ(spread({}).max, 0);
}

RankStats sample() {
  RankStats r;
  r.calls[{4, "shm"}] = {10, 4096, 0.25};
  r.calls[{2, "pmpi"}] = {1, 8, 1e-6};
  r.decisions.push_back({4, 6, "copy", 2e-5, {{"pmpi", 3e-5}, {"copy", 1e-5}}});
  r.counters["rdma_writes_posted"] = 7;
  r.setup["init_seconds"] = 0.5;
  return r;
}

TEST(JobReport, TextFormRoundTrips) {
  const RankStats back = RankStats::parse(sample().serialize());
  EXPECT_EQ(back.unreadable, 0u);
  ASSERT_EQ(back.calls.size(), 2u);
  EXPECT_EQ((back.calls.at({4, "shm"}).calls), 10u);
  EXPECT_EQ((back.calls.at({4, "shm"}).bytes), 4096u);
  EXPECT_DOUBLE_EQ((back.calls.at({4, "shm"}).seconds), 0.25);
  ASSERT_EQ(back.decisions.size(), 1u);
  EXPECT_EQ(back.decisions[0].path, "copy");
  ASSERT_EQ(back.decisions[0].medians_seconds.size(), 2u);
  EXPECT_DOUBLE_EQ(back.decisions[0].medians_seconds[1].second, 1e-5);
  EXPECT_EQ(back.counters.at("rdma_writes_posted"), 7);
  EXPECT_EQ(back.setup.at("init_seconds"), 0.5);
}

TEST(JobReport, CountsLinesItCannotRead) {
  EXPECT_EQ(RankStats::parse("call 4 shm x\nbogus\ncounter a 1\n").unreadable, 2u);
}

TEST(JobReport, SpreadsOverRanksThatMadeTheCalls) {
  RankStats other = sample();
  other.calls[{4, "shm"}].calls = 20;
  other.calls.erase({2, "pmpi"});
  other.counters.clear();  // counts as 0 for this rank
  const std::string json = render_job_report("mlxa2a test", {sample(), other});
  EXPECT_NE(json.find("\"schema\": \"mlxa2a-coll-stats/1\""), std::string::npos);
  EXPECT_NE(json.find("{\"comm_size\": 4, \"path\": \"shm\", \"ranks\": 2,\n     \"calls\": "
                      "{\"min\": 10, \"median\": 15, \"max\": 20}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"comm_size\": 2, \"path\": \"pmpi\", \"ranks\": 1,"), std::string::npos);
  EXPECT_NE(json.find("\"bytes_per_peer_from\": 64, \"bytes_per_peer_to\": 127, \"path\": "
                      "\"copy\", \"ranks\": 2"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"rdma_writes_posted\": {\"min\": 0, \"median\": 3.5, \"max\": 7}"),
            std::string::npos)
      << json;
}

TEST(JobReport, FabricOfEachLeaderRoundTripsAndIsReported) {
  RankStats leader = sample();
  leader.set_fabric("node7", "hca=mlx5_1:1 hca-by=numa0-near,rail1/2 link=roce tc=106 sl=3 "
                             "pkey=0xffff gid=3 stray");
  leader.counters["rdma_qps_live"] = 5;
  leader.counters["rdma_mrs_live"] = 4;
  leader.setup["rdma_qps_created"] = 6;
  ASSERT_EQ(leader.fabric.size(), 7u);  // "stray" has no '='
  const RankStats back = RankStats::parse(leader.serialize());
  EXPECT_EQ(back.unreadable, 0u);
  EXPECT_EQ(back.host, "node7");
  EXPECT_EQ(back.fabric, leader.fabric);
  // Rank 0 opened no device: no entry; rank 1's keys are JSON-style.
  const std::string json = render_job_report("mlxa2a test", {sample(), back});
  EXPECT_NE(json.find("\"fabric\": [\n    {\"rank\": 1, \"host\": \"node7\", \"hca\": "
                      "\"mlx5_1:1\", \"hca_by\": \"numa0-near,rail1/2\", \"link\": \"roce\", "
                      "\"tc\": \"106\", \"sl\": \"3\", \"pkey\": \"0xffff\", \"gid\": \"3\",\n"
                      "     \"qps_created\": 6, \"qps_live\": 5, \"mrs_live\": 4}\n  ]"),
            std::string::npos)
      << json;
  EXPECT_NE(render_job_report("x", {sample()}).find("\"fabric\": []\n}"), std::string::npos);
  EXPECT_EQ(RankStats::parse("fabric node7 nothing\n").unreadable, 1u);
}

// A rank that decided the same class alike on two communicators of one
// size counts once (measured selection stops early, so short runs decide
// more classes on more communicators).
TEST(JobReport, ARankCountsOncePerDecision) {
  RankStats twice = sample();
  twice.decisions.push_back(twice.decisions.front());
  const std::string json = render_job_report("mlxa2a test", {twice, sample()});
  EXPECT_NE(json.find("\"path\": \"copy\", \"ranks\": 2"), std::string::npos) << json;
}

}  // namespace
}  // namespace mlxa2a::core::stats
