// Quiet PMPI (core/tune/quiet.h): when a multi-node team's PMPI-routed calls
// skip the engine's check call, and how every rank leaves that state at the
// same call. MPI-free: the agreement is simulated as the MAX over ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tune/quiet.h"

namespace mlxa2a::core::tune {
namespace {

// The boundary calls after entering at `from`, none pending, up to `until`.
std::vector<std::uint64_t> boundaries(std::uint64_t from, std::uint64_t until) {
  QuietPmpi q;
  q.enter(from);
  std::vector<std::uint64_t> at;
  for (std::uint64_t call = from + 1; call <= until; ++call) {
    if (q.due(call)) {
      at.push_back(call);
      q.agreed(false, call);
      EXPECT_FALSE(q.due(call)) << "a boundary is agreed once per call";
    }
    EXPECT_TRUE(q.on());
  }
  return at;
}

TEST(QuietPmpi, OffUntilEntered) {
  QuietPmpi q;
  EXPECT_FALSE(q.on());
  EXPECT_FALSE(q.due(0));
  EXPECT_FALSE(q.due(1000000));
}

TEST(QuietPmpi, BoundariesDoubleUpTo256Calls) {
  const std::vector<std::uint64_t> want = {26, 58, 122, 250, 506, 762, 1018};
  EXPECT_EQ(boundaries(10, 1100), want);
}

TEST(QuietPmpi, SteadyStateCostsAboutOneAgreementPer256Calls) {
  const auto at = boundaries(0, 100000);
  EXPECT_LE(at.size(), 100000 / QuietPmpi::kMaxInterval + 5);
  for (std::size_t i = 1; i < at.size(); ++i) {
    EXPECT_LE(at[i] - at[i - 1], QuietPmpi::kMaxInterval);
  }
}

TEST(QuietPmpi, APendingClassEndsQuietAtTheNextBoundary) {
  QuietPmpi q;
  q.enter(100);
  q.note_pending();
  EXPECT_TRUE(q.on()) << "a held class waits for the boundary";
  EXPECT_FALSE(q.due(115));
  ASSERT_TRUE(q.due(116));
  q.agreed(true, 116);
  EXPECT_FALSE(q.on());
  EXPECT_FALSE(q.due(116));
  EXPECT_FALSE(q.due(100000));
}

TEST(QuietPmpi, EnteringAgainStartsAFreshSchedule) {
  QuietPmpi q;
  q.enter(0);
  q.note_pending();
  q.agreed(true, 16);
  ASSERT_FALSE(q.on());
  q.enter(500);
  EXPECT_FALSE(q.pending()) << "what was held before was measured meanwhile";
  EXPECT_EQ(q.next_boundary(), 516u);
}

// Ranks of an erroneous program: rank 1 calls a new size class at call 40
// (held), the others only a class decided pmpi. Every rank must agree at the
// same calls and leave quiet at the same call, or one would start a trial in
// the engine while a peer skips its check.
TEST(QuietPmpi, RanksLeaveTogetherWhenOneHeldAClass) {
  constexpr int kRanks = 3;
  std::vector<QuietPmpi> ranks(kRanks);
  for (QuietPmpi& q : ranks) q.enter(7);
  std::uint64_t left_at = 0;
  for (std::uint64_t call = 8; call < 400 && left_at == 0; ++call) {
    if (call == 40) ranks[1].note_pending();
    bool due_any = false, due_all = true, pending = false;
    for (const QuietPmpi& q : ranks) {
      due_any |= q.due(call);
      due_all &= q.due(call);
      pending |= q.pending();
    }
    ASSERT_EQ(due_any, due_all) << "call " << call;
    if (!due_all) continue;
    for (QuietPmpi& q : ranks) q.agreed(pending, call);
    if (pending) left_at = call;
  }
  EXPECT_EQ(left_at, 55u) << "7 + 16 = 23, + 32 = 55: the first boundary after call 40";
  for (const QuietPmpi& q : ranks) EXPECT_FALSE(q.on());
}

}  // namespace
}  // namespace mlxa2a::core::tune
