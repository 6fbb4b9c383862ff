// The set-up rule for one pair of leader processes (core/mlx5/link_rule.h),
// case by case - in particular the race between two teams of one process set
// up by different threads, where one end of a pair is already connected and
// the partner's end is still being connected by its other team.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mlxa2a::mlx5
