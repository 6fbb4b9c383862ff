// What a leader's RDMA set-up does with its end of one pair of processes
// (docs/hier.md, "Set-up and agreement"), from both ends' views: a pure
// rule, so the races between teams set up concurrently by different threads
// can be tested one case at a time (tests/mlx5/test_link_rule.cc).
//
// Contract: no state, no verbs calls; any thread.
#pragma once

#include <cstdint>

namespace mlxa2a::mlx5 {

// One end of a pair as a set-up sees it (exchanged between the leaders).
struct Link {
  // Pending: an endpoint another set-up (another thread's team) has created
  // but not connected yet; this team then falls back without disturbing it.
  enum : std::uint32_t { None = 0, New = 1, Existing = 2, Failed = 3, Pending = 4 };
  std::uint32_t state = None;
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint32_t remote_qpn = 0;  // Existing: the QP number it is connected to
  // The pair's further QPs (MLXA2A_NET_STRIPES): how many QPs the end has
  // and QPs 1..stripes-1's numbers and PSNs. Only QP 0 names the pair in
  // the rules below: an end's QPs are made and connected together.
  static constexpr std::uint32_t kMaxLanes = 7;
  std::uint32_t stripes = 1;
  std::uint32_t lane_qpn[kMaxLanes] = {};
  std::uint32_t lane_psn[kMaxLanes] = {};
};

enum class LinkAction {
  connect,      // both new: connect ours to theirs
  use,          // both existing and connected to each other
  leave,        // not usable by this team, but another team's: fall back, touch nothing
  discard,      // ours is new and unconnected: drop it, the next set-up makes both anew
  mark_failed,  // ours is connected but the pair disagrees: replace it at the next set-up
};

// `mine` is our end, `theirs` the partner's end of the same pair.
inline LinkAction pair_action(const Link& mine, const Link& theirs) noexcept {
  if (mine.state == Link::New && theirs.state == Link::New) return LinkAction::connect;
  if (mine.state == Link::Existing && theirs.state == Link::Existing) {
    return theirs.remote_qpn == mine.qpn && theirs.qpn == mine.remote_qpn ? LinkAction::use
                                                                          : LinkAction::mark_failed;
  }
  if (mine.state == Link::Pending) return LinkAction::leave;
  // Our end is connected to the very QP another team of the partner is still
  // connecting (that team's set-up on our side has finished first): it works,
  // or is about to, for that team - marking it failed would break a team in
  // use (an MPI error on a healthy job).
  if (mine.state == Link::Existing && theirs.state == Link::Pending &&
      theirs.qpn == mine.remote_qpn) {
    return LinkAction::leave;
  }
  if (mine.state == Link::New) return LinkAction::discard;
  if (mine.state == Link::Existing) return LinkAction::mark_failed;
  return LinkAction::leave;  // None / Failed: nothing of ours to change
}

// A pair whose ends are both live (New or Existing) but not usable as they
// are - one end was replaced (its QP was found in error at set-up) or they
// are connected elsewhere: both ends can make it anew within this set-up (a
// repair round), so the team gets RDMA instead of falling back until a later
// set-up converges. Symmetric in its arguments. The end whose link is
// Existing replaces its QP; a New end keeps its fresh one.
inline bool repairable(const Link& mine, const Link& theirs) noexcept {
  auto live = [](const Link& l) { return l.state == Link::New || l.state == Link::Existing; };
  if (!live(mine) || !live(theirs)) return false;
  const LinkAction act = pair_action(mine, theirs);
  return act != LinkAction::connect && act != LinkAction::use;
}

// Whether the set-up needs its repair round, from every member's links
// (all[p * size + q]: p's end towards q): the rule the set-up's pairwise
// agreement computes without such a table (rdma_setup.cc agree_repair: each
// member ORs repairable() over its own pairs, one word per member).
inline bool needs_repair(const Link* all, int size) noexcept {
  for (int p = 0; p < size; ++p) {
    for (int q = p + 1; q < size; ++q) {
      if (repairable(all[p * size + q], all[q * size + p])) return true;
    }
  }
  return false;
}

}  // namespace mlxa2a::mlx5
