// The data layout of one hierarchical alltoall (docs/hier.md "Layout").
//
// Contract: pure computation. Every rank builds the same NodeMap from the
// agreed node ids, hence the same chunk and round count for a bytes_per_peer:
// that keeps all ranks in step.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/hier/transport.h"

namespace mlxa2a::hier {

// Nodes are numbered by their lowest rank; members in rank order, so a rank's
// index in its node is its local rank in a node communicator split by rank.
class NodeMap {
 public:
  // node_ids[r]: shared exactly by the ranks on r's node. leads[r] != 0: r
  // leads (as every node's first rank; empty: only they); >= 2: on rail leads[r] - 2.
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
  int ranks_before(int node) const { return before_[static_cast<std::size_t>(node)]; }
  // d when the members are first, first + d, first + 2d, ...; 0 when irregular.
  int member_step(int node) const { return step_[static_cast<std::size_t>(node)]; }
  // Indices in the node, ascending (leader j = entry j).
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

// One node's staging layout for chunks of c bytes per peer (docs/hier.md
// "Layout"). Both areas: Headers at header(m), fixed whatever the call's size
// so a partner of another size finds them; then section m at section(m, c),
// rows placed by rows.h. In-area section m is exactly the message to node m;
// out-area section m is where node m's lands (unused for this node: local
// blocks are read from the in-area).
class Plan {
 public:
  // stage_bytes_per_rank: one rank's staging slot; at least 64 bytes per peer.
  Plan(const NodeMap& map, int rank, std::size_t stage_bytes_per_rank);

  const NodeMap& map() const { return map_; }
  int rank() const { return rank_; }
  int node() const { return node_; }
  int local_rank() const { return local_; }
  int local_size() const { return map_.node_size(node_); }
  int leader_index() const { return leader_index_; }  // -1: not a leader
  bool leader() const { return leader_index_ >= 0; }
  // Node k's remote nodes, counted from k + 1, go to its leaders in turn, by
  // one rule at both ends (docs/hier.md, leader exchange); with rails on both,
  // one common rail by rail_round() (docs/hier-transports.md "Every rail").
  int handled_by(int node) const { return serve_[static_cast<std::size_t>(node)]; }
  // The k-th node (k = 1 .. N-1) to send to: from the next node on, so that
  // no node is every leader's first target (an incast).
  int target(int k) const { return (node_ + k) % map_.nodes(); }
  int partner(int node) const { return partner_[static_cast<std::size_t>(node)]; }
  int serving(int k, int m) const;  // which of node k's leaders serves m
  // The round in which nodes a != b of n meet in a round-robin tournament
  // (symmetric; a node meets the others in distinct rounds).
  static int rail_round(int a, int b, int n);

  std::size_t max_chunk() const { return max_chunk_; }  // alike on every rank
  std::size_t area_bytes() const { return area_bytes_; }  // in and out alike
  // Sized by the team, not the node count: known before the node map.
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
  // Where our message lands in node m's out-area: laid out with m's size.
  std::size_t remote_section(int node, std::size_t chunk) const {
    return header_bytes_ + static_cast<std::size_t>(map_.node_size(node)) * chunk *
                               static_cast<std::size_t>(map_.ranks_before(node_));
  }
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
