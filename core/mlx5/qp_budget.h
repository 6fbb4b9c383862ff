// The RC queue-pair budget of a process (issue 39, item 2). RC needs one QP
// per partner process, so a leader's count grows with the node count; above
// the budget a team's leaders do not use RC (docs/hier-transports.md, "The
// QP budget"). MPI-free and verbs-free.
//
// Contract
// * default_rc_qp_budget(): half of the HCA's max_qp is left to everything
//   else on the node (the MPI library's own transport, other jobs), the other
//   half is split evenly among the node's processes - any of them may lead
//   some team. At least 1.
// * rc_qp_budget(): MLXA2A_NET_RC_QP_BUDGET when set (not 0), else the
//   default; `from` says which, for the trace.
// * rc_over_budget(): whether `needed` QPs (those the process holds plus
//   those a set-up would add) exceed the budget; when they do *why says so
//   with the numbers, naming the switch.
#pragma once

#include <cstdint>
#include <string>

namespace mlxa2a::mlx5 {

struct QpBudget {
  std::uint64_t limit = 0;
  const char* from = "";  // "MLXA2A_NET_RC_QP_BUDGET" or "max_qp/(2*ranks per node)"
};

std::uint64_t default_rc_qp_budget(std::int64_t max_qp, int ranks_per_node) noexcept;
QpBudget rc_qp_budget(std::uint32_t switch_value, std::int64_t max_qp,
                      int ranks_per_node) noexcept;
bool rc_over_budget(std::uint64_t needed, const QpBudget& budget, std::string* why) noexcept;

}  // namespace mlxa2a::mlx5
