// The set-up rule for one pair of leader processes (core/mlx5/link_rule.h),
// case by case - in particular the race between two teams of one process set
// up by different threads, where one end of a pair is already connected and
// the partner's end is still being connected by its other team.
#include <gtest/gtest.h>

#include <vector>

#include "core/mlx5/link_rule.h"

namespace mlxa2a::mlx5 {
namespace {

Link make(std::uint32_t state, std::uint32_t qpn, std::uint32_t remote_qpn = 0) {
  return Link{state, qpn, 7, remote_qpn};
}

TEST(LinkRule, BothNewConnect) {
  EXPECT_EQ(pair_action(make(Link::New, 10), make(Link::New, 20)), LinkAction::connect);
}

TEST(LinkRule, BothExistingUseOnlyWhenConnectedToEachOther) {
  EXPECT_EQ(pair_action(make(Link::Existing, 10, 20), make(Link::Existing, 20, 10)),
            LinkAction::use);
  EXPECT_EQ(pair_action(make(Link::Existing, 10, 20), make(Link::Existing, 21, 10)),
            LinkAction::mark_failed);
  EXPECT_EQ(pair_action(make(Link::Existing, 10, 20), make(Link::Existing, 20, 11)),
            LinkAction::mark_failed);
}

// The flake of ompi-np4-rdma-threads-vnodes-2 (zero-copy forced): team X on
// our side had connected QP 10 to the partner's QP 20, whose team X had not
// yet marked it connected when team Y's set-up looked at it there. Team Y
// must fall back without marking our QP 10 failed: team X uses it (the old
// rule said mark_failed, and X's next exchange failed with MPI_ERR_OTHER).
TEST(LinkRule, ExistingEndLeftAloneWhilePartnerStillConnectsThatVeryQp) {
  EXPECT_EQ(pair_action(make(Link::Existing, 10, 20), make(Link::Pending, 20)),
            LinkAction::leave);
}

TEST(LinkRule, ExistingEndReplacedWhenPartnerConnectsAnotherQp) {
  EXPECT_EQ(pair_action(make(Link::Existing, 10, 20), make(Link::Pending, 21)),
            LinkAction::mark_failed);
}

TEST(LinkRule, PendingEndIsAnotherTeamsBusiness) {
  for (std::uint32_t theirs : {Link::New, Link::Existing, Link::Pending}) {
    EXPECT_EQ(pair_action(make(Link::Pending, 10), make(theirs, 20, 10)), LinkAction::leave);
  }
}

TEST(LinkRule, NewEndDiscardedWhenThePartnerDoesNotAlsoStartAnew) {
  for (std::uint32_t theirs : {Link::Existing, Link::Pending, Link::Failed}) {
    EXPECT_EQ(pair_action(make(Link::New, 10), make(theirs, 20, 11)), LinkAction::discard);
  }
}

TEST(LinkRule, ExistingEndReplacedWhenThePartnerStartsAnewOrFailed) {
  for (std::uint32_t theirs : {Link::New, Link::Failed}) {
    EXPECT_EQ(pair_action(make(Link::Existing, 10, 20), make(theirs, 20)),
              LinkAction::mark_failed);
  }
}

// A QP found in error at set-up is replaced on one end (New) while the
// partner's end is still connected (Existing): both ends redo the pair in the
// set-up's repair round, as they do two ends connected elsewhere.
TEST(LinkRule, LiveEndsThatDisagreeAreRepairedTogether) {
  EXPECT_TRUE(repairable(make(Link::New, 10), make(Link::Existing, 20, 9)));
  EXPECT_TRUE(repairable(make(Link::Existing, 20, 9), make(Link::New, 10)));
  EXPECT_TRUE(repairable(make(Link::Existing, 10, 20), make(Link::Existing, 21, 10)));
  EXPECT_FALSE(repairable(make(Link::New, 10), make(Link::New, 20)));
  EXPECT_FALSE(repairable(make(Link::Existing, 10, 20), make(Link::Existing, 20, 10)));
  for (std::uint32_t other : {Link::None, Link::Failed, Link::Pending}) {
    EXPECT_FALSE(repairable(make(Link::New, 10), make(other, 20, 10)));
    EXPECT_FALSE(repairable(make(other, 20, 10), make(Link::Existing, 10, 20)));
  }
}

TEST(LinkRule, EveryMemberAgreesWhetherARepairRoundIsNeeded) {
  // Three members; 0-1 connected to each other, 0-2 and 1-2 not partners.
  std::vector<Link> all(9);
  all[0 * 3 + 1] = make(Link::Existing, 10, 20);
  all[1 * 3 + 0] = make(Link::Existing, 20, 10);
  EXPECT_FALSE(needs_repair(all.data(), 3));
  all[1 * 3 + 0] = make(Link::New, 21);  // 1 found its QP in error and made a new one
  EXPECT_TRUE(needs_repair(all.data(), 3));
}

}  // namespace
}  // namespace mlxa2a::mlx5
