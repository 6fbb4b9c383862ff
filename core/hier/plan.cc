#include "core/hier/plan.h"

#include <algorithm>
#include <map>

#include "core/shm/layout.h"

namespace mlxa2a::hier {

NodeMap::NodeMap(std::span<const int> node_ids, std::span<const int> leads) {
  const std::size_t n = node_ids.size();
  node_of_.resize(n);
  index_.resize(n);
  std::map<int, int> number;  // node id -> node number (order of lowest rank)
  for (std::size_t r = 0; r < n; ++r) {
    const auto [it, added] = number.emplace(node_ids[r], static_cast<int>(members_.size()));
    if (added) members_.emplace_back();
    auto& m = members_[static_cast<std::size_t>(it->second)];
    node_of_[r] = it->second;
    index_[r] = static_cast<int>(m.size());
    m.push_back(static_cast<int>(r));
  }
  int before = 0;
  for (const auto& m : members_) {
    before_.push_back(before);
    before += static_cast<int>(m.size());
    largest_ = std::max(largest_, static_cast<int>(m.size()));
    int step = m.size() > 1 ? m[1] - m[0] : 1;
    for (std::size_t i = 2; i < m.size() && step != 0; ++i) {
      if (m[i] - m[i - 1] != step) step = 0;
    }
    step_.push_back(step);
    std::vector<int>& l = leaders_.emplace_back(1, 0);
    auto lead = [&](std::size_t i) {
      const std::size_t r = static_cast<std::size_t>(m[i]);
      return r < leads.size() ? leads[r] : 0;
    };
    std::vector<int>& rails = rails_.emplace_back(1, lead(0) >= 2 ? lead(0) - 2 : -1);
    for (std::size_t i = 1; i < m.size(); ++i) {
      if (lead(i) == 0) continue;
      l.push_back(static_cast<int>(i));
      rails.push_back(lead(i) >= 2 ? lead(i) - 2 : -1);
    }
    railed_.push_back(std::all_of(rails.begin(), rails.end(), [](int r) { return r >= 0; }));
  }
}

int Plan::rail_round(int a, int b, int n) {
  const int rounds = n % 2 ? n : n - 1;  // even n: node n - 1 meets node a in round a
  if (a == rounds) return b;
  if (b == rounds) return a;
  return static_cast<int>((static_cast<long>(a + b) * ((rounds + 1) / 2)) % rounds);
}

int Plan::serving(int k, int m) const {
  const int n = map_.nodes();
  if (map_.railed(k) && map_.railed(m)) {
    // The rails both nodes have, ascending; the pair's round picks one.
    int common[64], count = 0;
    for (int j = 0; j < map_.leader_count(k) && count < 64; ++j) {
      for (int i = 0; i < map_.leader_count(m) && count < 64; ++i) {
        if (map_.rail(m, i) == map_.rail(k, j)) common[count++] = map_.rail(k, j);
      }
    }
    std::sort(common, common + count);
    if (count > 0) {
      const int rail = common[rail_round(k, m, n) % count];
      for (int j = 0; j < map_.leader_count(k); ++j) {
        if (map_.rail(k, j) == rail) return j;
      }
    }
  }
  return ((m - k - 1 + n) % n) % map_.leader_count(k);
}

Plan::Plan(const NodeMap& map, int rank, std::size_t stage_bytes_per_rank)
    : map_(map), rank_(rank), node_(map.node_of(rank)), local_(map.index_in_node(rank)) {
  const std::vector<int>& leaders = map.leaders(node_);
  for (std::size_t j = 0; j < leaders.size(); ++j) {
    if (leaders[j] == local_) leader_index_ = static_cast<int>(j);
  }
  for (int m = 0; m < map.nodes(); ++m) {
    serve_.push_back(m == node_ ? 0 : serving(node_, m));
    partner_.push_back(m == node_ ? 0 : serving(m, node_));
  }
  const std::size_t n = static_cast<std::size_t>(map.size());
  // Each rank stages n blocks of one chunk; whole cache lines when there is
  // room for them, so that no two ranks write the same line.
  std::size_t chunk = stage_bytes_per_rank / n;
  chunk = chunk >= 64 ? chunk / 64 * 64 : 64;
  max_chunk_ = chunk;
  header_bytes_ = header_bytes(map.size());
  // 0 when it overflows; HierAlltoall::create() then refuses the stage.
  area_bytes_ = (shm::layout::Size(static_cast<std::size_t>(local_size())) * n * chunk +
                 header_bytes_)
                    .value();
}

}  // namespace mlxa2a::hier
