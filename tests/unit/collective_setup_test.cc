// CollectiveSetup (core/collective_setup.h): every step runs whatever failed
// before, the first failure is the one kept, and agree() hands this rank's
// outcome to the injected agreement once and keeps its answer.
#include "core/collective_setup.h"

#include <gtest/gtest.h>

#include <new>
#include <string>
#include <vector>

namespace mlxa2a {
namespace {

TEST(CollectiveSetup, EveryStepRunsAfterAFailureAndTheFirstFailureIsKept) {
  CollectiveSetup setup;
  std::vector<int> ran;
  setup.step([&] { ran.push_back(1); })
      .step([&] {
        ran.push_back(2);
        return Status::create_failed;
      })
      .step([&] {
        ran.push_back(3);
        setup.fail(Status::timeout, "later");
        return false;
      })
      .step([&] { ran.push_back(4); });
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_TRUE(setup.failed_here());
  EXPECT_EQ(setup.outcome().status, Status::create_failed);
  EXPECT_EQ(setup.outcome().why, "");
}

TEST(CollectiveSetup, AStepFailsByFalseStatusFailOrThrowing) {
  CollectiveSetup by_false(Status::bootstrap_failed);
  by_false.step([] { return false; });
  EXPECT_EQ(by_false.outcome().status, Status::bootstrap_failed);

  CollectiveSetup by_status;
  by_status.step([] { return Status::too_large; });
  EXPECT_EQ(by_status.outcome().status, Status::too_large);

  CollectiveSetup by_fail;
  by_fail.step([&] { by_fail.fail(Status::unavailable, std::string("no device")); });
  EXPECT_EQ(by_fail.outcome().status, Status::unavailable);
  EXPECT_EQ(by_fail.outcome().why, "no device");

  CollectiveSetup by_throw(Status::create_failed);
  bool after = false;
  by_throw.step([]() -> bool { throw std::bad_alloc(); }).step([&] { after = true; });
  EXPECT_TRUE(after);
  EXPECT_EQ(by_throw.outcome().status, Status::create_failed);
  EXPECT_EQ(by_throw.outcome().why, "out of memory");

  CollectiveSetup fine;
  fine.step([] { return true; }).step([] { return Status::ok; });
  fine.fail(Status::ok, "not a failure");
  EXPECT_FALSE(fine.failed_here());
}

TEST(CollectiveSetup, AgreeCallsTheAgreementOnceAndKeepsItsAnswer) {
  CollectiveSetup setup;
  setup.step([] { return true; });
  int calls = 0;
  const SetupOutcome& agreed = setup.agree([&](const SetupOutcome& here) {
    ++calls;
    EXPECT_TRUE(here.ok());
    return SetupOutcome{Status::peer_failed, "rank 3 failed"};  // a peer's failure
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(agreed.status, Status::peer_failed);
  EXPECT_EQ(agreed.why, "rank 3 failed");
  EXPECT_TRUE(setup.failed_here());  // later steps see the agreed outcome

  CollectiveSetup throwing;
  throwing.agree([](const SetupOutcome&) -> SetupOutcome { throw std::bad_alloc(); });
  EXPECT_TRUE(throwing.failed_here());
}

// Ranks simulated one after the other: whichever rank fails in whichever
// step, every rank makes the same collective calls in the same order, and all
// end with the same outcome.
TEST(CollectiveSetup, EveryRankMakesTheSameCollectiveCallsWhoeverFails) {
  constexpr int kRanks = 4, kSteps = 3;
  for (int bad_rank = -1; bad_rank < kRanks; ++bad_rank) {
    for (int bad_step = 0; bad_step < kSteps; ++bad_step) {
      std::vector<CollectiveSetup> ranks(kRanks);
      std::vector<std::vector<int>> collectives(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        for (int s = 0; s < kSteps; ++s) {
          ranks[r].step([&, r, s] {
            collectives[r].push_back(s);  // each step is a collective
            return !(r == bad_rank && s == bad_step);
          });
        }
      }
      // The agreement (an allreduce in production): the worst outcome.
      SetupOutcome worst;
      for (const CollectiveSetup& c : ranks) {
        if (!c.outcome().ok()) worst = c.outcome();
      }
      for (int r = 0; r < kRanks; ++r) {
        EXPECT_EQ(collectives[r], collectives[0]);
        ranks[r].agree([&](const SetupOutcome&) { return worst; });
        EXPECT_EQ(ranks[r].failed_here(), bad_rank >= 0) << "rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace mlxa2a
