// The data layout of one hierarchical alltoall: ranks of a node stage their
// blocks at the node's leader, leaders exchange one message per pair of nodes,
// ranks pick their results up (docs/hier.md).
//
// Contract: pure computation, no MPI, no shared memory. Every rank of a team
// builds the same NodeMap from the same agreed node ids and therefore the
// same chunk size and round count for a given bytes_per_peer, which is what
// keeps all ranks in step (no rank ever runs a different number of rounds).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/hier/transport.h"

namespace mlxa2a::hier {

// Which ranks of a team each node holds, and which of them lead. Nodes are
// numbered by their lowest rank (node 0 holds rank 0); a node's members are
// listed in rank order, so a rank's index in its node is its local rank in a
// node communicator split with key = rank.
class NodeMap {
 public:
  // node_ids[r]: any value shared exactly by the ranks on r's node.
  // leads[r] != 0: rank r is one of its node's leaders; empty: every node's
  // first rank leads. A node's first rank always leads. leads[r] >= 2: it
  // leads rail leads[r] - 2 (MLXA2A_LEADERS=rails; Plan::serving pairs rails).
  explicit NodeMap(std::span<const int> node_ids, std::span<const int> leads = {});

  int size() const { return static_cast<int>(node_of_.size()); }
  int nodes() const { return static_cast<int>(members_.size()); }
  int node_of(int rank) const { return node_of_[static_cast<std::size_t>(rank)]; }
  int index_in_node(int rank) const { return index_[static_cast<std::size_t>(rank)]; }
  int node_size(int node) const { return static_cast<int>(members_[node].size()); }
  int largest_node() const { return largest_; }
  const std::vector<int>& members(int node) const {
    return members_[static_cast<std::size_t>(node)];
  }
  // Ranks on nodes numbered below `node` (where that node's section starts in
  // a staging area laid out by destination node).
  int ranks_before(int node) const { return before_[static_cast<std::size_t>(node)]; }
  // d when the node's members are first, first + d, first + 2d, ... (block
  // layouts give 1, round robin gives the node count); 0 when irregular.
  int member_step(int node) const { return step_[static_cast<std::size_t>(node)]; }
  // The node's leaders as indices in the node, ascending (leader j = entry j).
  const std::vector<int>& leaders(int node) const {
    return leaders_[static_cast<std::size_t>(node)];
  }
  int leader_count(int node) const { return static_cast<int>(leaders(node).size()); }
  // Leader j's rail (-1: none), and whether every leader of the node has one.
  int rail(int node, int j) const {
    return rails_[static_cast<std::size_t>(node)][static_cast<std::size_t>(j)];
  }
  bool railed(int node) const { return railed_[static_cast<std::size_t>(node)] != 0; }

 private:
  std::vector<int> node_of_;
  std::vector<int> index_;
  std::vector<std::vector<int>> members_;
  std::vector<int> before_;
  std::vector<int> step_;
  std::vector<std::vector<int>> leaders_;
  std::vector<std::vector<int>> rails_;
  std::vector<char> railed_;
  int largest_ = 0;
};

// The staging layout of one rank's node, for chunks of c bytes per peer.
// Both areas start with a header region of header_bytes(): the Header this
// node's leader sends to node m (in-area) or received from node m (out-area)
// at header(m) — fixed offsets, whatever the call's size, so that a partner
// called with another size still finds it (docs/hier.md, "Sizes that differ").
// Both areas are indexed alike: section m (one per node m) starts at
// header_bytes() + L * c * ranks_before(m), where L is this node's size, and holds block
// [a][b] at block_slot(a, b, L_m, c) * c in the in-area (a: local source, b:
// destination index in m) and block [s][j] at block_slot(s, j, L, c) * c in
// the out-area (s: source index in m, j: local destination): row by row,
// each row rotated by its source from 64-byte chunks (core/hier/rows.h). The in-area's section m is exactly the
// message this node's leader sends to node m's leader, and the out-area's
// section m is where the message from node m's leader lands; section m of
// the out-area for m == this node stays unused (local blocks are read from
// the in-area, which has the same [source][destination] layout there).
class Plan {
 public:
  // stage_bytes_per_rank: the staging budget of one rank (MLXA2A_SHM_SLOT_SIZE);
  // raised to 64 bytes per peer when smaller.
  Plan(const NodeMap& map, int rank, std::size_t stage_bytes_per_rank);

  const NodeMap& map() const { return map_; }
  int rank() const { return rank_; }
  int node() const { return node_; }
  int local_rank() const { return local_; }
  int local_size() const { return map_.node_size(node_); }
  // My index among my node's leaders, -1 if I do not lead.
  int leader_index() const { return leader_index_; }
  bool leader() const { return leader_index_ >= 0; }
  // Node k's remote nodes, counted from k (k+1, k+2, ... mod N), go to its
  // leaders in turn: leader j serves the nodes m with ((m - k - 1) mod N)
  // mod leaders(k) == j, and talks there to the leader of m that serves k by
  // the same rule, so both ends agree and every leader of a node serves
  // floor or ceil((N-1)/leaders) nodes. (m mod leaders(k) did not: on 3
  // nodes with 2 leaders, node 1's remote nodes 0 and 2 both went to leader 0.)
  // Rails (both nodes' leaders all have one, NodeMap::rail): the pair's
  // leaders are those of one rail both nodes have, chosen symmetrically by
  // rail_round() (docs/hier-transports.md, "Every rail").
  int handled_by(int node) const { return serve_[static_cast<std::size_t>(node)]; }
  // The k-th node (k = 1 .. N-1) a leader of this node sends to: from the
  // next node on, cyclically, so that no node is every leader's first
  // target (issue 39: node order made node 0 an incast on one HCA); a
  // leader skips those another leader of its node handles.
  int target(int k) const { return (node_ + k) % map_.nodes(); }
  int partner(int node) const { return partner_[static_cast<std::size_t>(node)]; }
  // Which of node k's leaders serves its remote node m.
  int serving(int k, int m) const;
  // The round in which nodes a != b of n meet in a round-robin tournament
  // (symmetric; a node meets the others in distinct rounds).
  static int rail_round(int a, int b, int n);

  // Bytes per peer moved per round, equal on every rank of the team.
  std::size_t max_chunk() const { return max_chunk_; }
  // Size of the in-area and of the out-area of this node (headers included).
  std::size_t area_bytes() const { return area_bytes_; }
  // The header region: one Header per node, 64-byte rounded; bounded by the
  // team size so that it is known before the node map (HierAlltoall::area_bytes).
  static std::size_t header_bytes(int team_size) {
    return (static_cast<std::size_t>(team_size) * sizeof(Header) + 63) / 64 * 64;
  }
  std::size_t header(int node) const { return static_cast<std::size_t>(node) * sizeof(Header); }
  std::size_t rounds(std::size_t bytes_per_peer) const {
    return (bytes_per_peer + max_chunk_ - 1) / max_chunk_;
  }
  std::size_t section(int node, std::size_t chunk) const {
    return header_bytes_ + static_cast<std::size_t>(local_size()) * chunk *
                               static_cast<std::size_t>(map_.ranks_before(node));
  }
  // Where this node's message lands in node m's out-area: section `node()`
  // of m's layout, whose rows are m's size (the sender's own section m is
  // laid out with this node's size).
  std::size_t remote_section(int node, std::size_t chunk) const {
    return header_bytes_ + static_cast<std::size_t>(map_.node_size(node)) * chunk *
                               static_cast<std::size_t>(map_.ranks_before(node_));
  }
  // Bytes of the message between this node's leader and node m's leader.
  std::size_t message_bytes(int node, std::size_t chunk) const {
    return static_cast<std::size_t>(local_size()) * static_cast<std::size_t>(map_.node_size(node)) *
           chunk;
  }

 private:
  const NodeMap& map_;
  int rank_;
  int node_;
  int local_;
  int leader_index_ = -1;
  std::vector<int> serve_;    // per node: serving(node(), m)
  std::vector<int> partner_;  // per node: serving(m, node())
  std::size_t max_chunk_;
  std::size_t header_bytes_;
  std::size_t area_bytes_;
};

}  // namespace mlxa2a::hier
