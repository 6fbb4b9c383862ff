// The PMPI leaders' staging slot (docs/hier-transports.md "The staging slot"):
// halved while the largest node's segment (4 x ranks x slot) exceeds `limit`
// (0: none), never below `floor` unless already smaller. Pure: every rank
// computes the same from agreed input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace mlxa2a::hier {

constexpr std::uint64_t limited_pmpi_slot(std::uint64_t slot, std::uint64_t floor,
                                          std::uint64_t limit, int largest_node) noexcept {
  if (limit == 0 || largest_node <= 0) return slot;
  const auto segment = [&](std::uint64_t s) {
    return 4 * static_cast<std::uint64_t>(largest_node) * s;  // no overflow: s <= 1G
  };
  while (slot / 2 >= floor && segment(slot) > limit) slot /= 2;
  return slot;
}

// The most ranks any node of the team has; node_ids[r] is rank r's node's
// first rank (EngineRequest::node_ids), so each id is below the team size.
inline int largest_node(std::span<const int> node_ids) {
  std::vector<int> count(node_ids.size(), 0);
  int most = 0;
  for (const int id : node_ids) {
    if (id >= 0 && static_cast<std::size_t>(id) < count.size()) {
      most = std::max(most, ++count[static_cast<std::size_t>(id)]);
    }
  }
  return most;
}

}  // namespace mlxa2a::hier
