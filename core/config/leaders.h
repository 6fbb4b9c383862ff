// MLXA2A_LEADERS: how many leaders each node's ranks relay through in the
// hierarchical alltoall (docs/hier.md).
//
//   "rails"   one leader per rail (ACTIVE HCA port) of the node, bounded by its
//             ranks; leaders pair across nodes by rail (default;
//             docs/hier-transports.md, "Every rail")
//   "node"    one leader per node
//   "numa"    one per NUMA domain that holds ranks of the communicator
//   "socket"  one per processor package that holds ranks of the communicator
//   "N"       N leaders per node (at most the node's ranks), spread evenly
//             over its ranks; for tests and for nodes whose ranks are unbound
//
// A rank bound to CPUs of several domains, or not bound at all, has no domain
// (-1); such ranks are grouped as one domain. Leaders of a node split the
// remote nodes between them, so their messages travel in parallel.
//
// Contract: pure functions, no MPI, no hwloc (core/mpi finds the domains).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mlxa2a::core::config {

struct LeaderPolicy {
  enum class Kind { Node, Numa, Socket, Count, Rails };
  Kind kind = Kind::Rails;
  int count = 1;  // Count only

  static std::optional<LeaderPolicy> parse(std::string_view text);
  std::string format() const;
  // Whether choose_leaders() needs every local rank's domain.
  bool needs_domains() const { return kind == Kind::Numa || kind == Kind::Socket; }
  friend bool operator==(const LeaderPolicy&, const LeaderPolicy&) = default;
};

inline constexpr std::string_view kLeaderPolicySyntax =
    "rails, node, numa, socket, or a number of leaders per node from 1 to 1024";

// The local ranks (ascending) that lead a node of domain_of.size() ranks;
// domain_of[i] is local rank i's domain (-1: none). Never empty when the node
// has ranks; local rank 0 always leads.
std::vector<int> choose_leaders(const LeaderPolicy& policy, std::span<const int> domain_of);

// Rails: rail_of[i] is local rank i's rail (-1: none). The lowest local rank
// of each rail present leads it, and local rank 0 always leads (its own
// rail). Ascending; never empty when the node has ranks.
std::vector<int> choose_rail_leaders(std::span<const int> rail_of);

// The rail a rank proposes when its process has no port open yet: local
// rank i of `size` over `rails` rails, in blocks (-1 when rails < 2).
int proposed_rail(int local_rank, int size, int rails);

}  // namespace mlxa2a::core::config
