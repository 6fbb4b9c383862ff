// MLXA2A_DEBUG_NODE_SIZE (tests only): the ranks of one host pretend to sit on
// several nodes, so the multi-node engines run on one machine. A virtual node
// is always intersected with the real one: it can only make jobs slower.
//
// Syntax (ranks are MPI_COMM_WORLD ranks, so a process keeps its virtual node
// in every communicator, like a real one):
//   "0"        real nodes (default)
//   "N"        blocks of N consecutive ranks: node = rank / N
//   "rr:N"     N ranks per node placed round robin over ceil(size / N) nodes:
//              node = rank % ceil(size / N)
//   "A,B,C"    irregular blocks of A, then B, then C ranks, the list repeated
//              cyclically: "3,1,2" at 8 ranks gives {0,1,2} {3} {4,5} {6,7}
//
// Contract: pure functions, no MPI; parse() accepts exactly the syntax above
// (every number from 1 to 1,000,000, at most 64 list entries).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlxa2a::core::config {

struct NodeLayout {
  enum class Kind { Real, Block, RoundRobin, Irregular };
  Kind kind = Kind::Real;
  int per_node = 0;         // Block, RoundRobin
  std::vector<int> sizes;   // Irregular

  static std::optional<NodeLayout> parse(std::string_view text);
  bool virtual_nodes() const { return kind != Kind::Real; }
  // The virtual node of world_rank among world_size ranks (0 for Real).
  int node_of(int world_rank, int world_size) const;
  // Canonical text, parse(format()) == *this.
  std::string format() const;
  friend bool operator==(const NodeLayout&, const NodeLayout&) = default;
};

// What MLXA2A_DEBUG_NODE_SIZE accepts, for warnings.
inline constexpr std::string_view kNodeLayoutSyntax =
    "0 (real nodes), N (blocks of N ranks), rr:N (N ranks per node, round robin) or a list "
    "of block sizes such as 3,1,2 (repeated)";

}  // namespace mlxa2a::core::config
