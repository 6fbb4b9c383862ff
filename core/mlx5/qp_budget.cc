#include "core/mlx5/qp_budget.h"

#include <cstdio>

namespace mlxa2a::mlx5 {

std::uint64_t default_rc_qp_budget(std::int64_t max_qp, int ranks_per_node) noexcept {
  if (max_qp <= 0) return 1;
  const std::uint64_t ppn = ranks_per_node > 0 ? static_cast<std::uint64_t>(ranks_per_node) : 1;
  const std::uint64_t share = static_cast<std::uint64_t>(max_qp) / (2 * ppn);
  return share > 0 ? share : 1;
}

QpBudget rc_qp_budget(std::uint32_t switch_value, std::int64_t max_qp,
                      int ranks_per_node) noexcept {
  if (switch_value != 0) return {switch_value, "MLXA2A_NET_RC_QP_BUDGET"};
  return {default_rc_qp_budget(max_qp, ranks_per_node), "max_qp/(2*ranks per node)"};
}

bool rc_over_budget(std::uint64_t needed, const QpBudget& budget, std::string* why) noexcept {
  if (needed <= budget.limit) return false;
  char text[192];
  std::snprintf(text, sizeof text,
                "RC needs %llu queue pairs in this process, above its budget of %llu (%s)",
                static_cast<unsigned long long>(needed),
                static_cast<unsigned long long>(budget.limit), budget.from);
  try {
    *why = text;
  } catch (...) {  // the trace's text only
  }
  return true;
}

}  // namespace mlxa2a::mlx5
