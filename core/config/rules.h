// MLXA2A_TUNE: which path serves which message size.
//
// Syntax (UCC-like): rules separated by '#', each "RANGE:PATH" or just "PATH"
// (= every size). RANGE is "LO-HI" in bytes per peer, half-open [LO, HI), with
// size suffixes K/M/G/T and HI = "inf" for no upper bound. PATH is one of
// auto | shm | rdma | pmpi. Later rules override earlier ones where they overlap;
// sizes no rule covers use auto. Example: "0-4K:shm#4K-inf:pmpi".
//
// A Table is immutable after parse; lookup() is lock-free and allocation-free.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/route/route.h"

namespace mlxa2a::core::config::rules {

// A rule's route: one of the four names MLXA2A_TUNE accepts (Route::auto_,
// shm, rdma, pmpi; core/route/route.h).
std::optional<Route> rule_route_from_string(std::string_view s);

struct Rule {
  std::uint64_t lo = 0;
  std::uint64_t hi = UINT64_MAX;  // exclusive; UINT64_MAX means "inf"
  Route route = Route::auto_;
  friend bool operator==(const Rule&, const Rule&) = default;
};

class Table {
 public:
  Table();  // "auto" for every size

  // Parses the syntax above. On failure returns nullopt and sets *error to a
  // description that names the offending rule.
  static std::optional<Table> parse(std::string_view text, std::string* error);

  Route lookup(std::uint64_t bytes_per_peer) const {
    for (const Rule& r : disjoint_) {
      if (bytes_per_peer < r.hi) return r.route;
    }
    return disjoint_.back().route;  // bytes_per_peer == UINT64_MAX
  }
  // True when every size maps to the same path. The path may still depend on
  // the size when it is auto (a team's auto ranges), so only a uniform pmpi
  // table lets callers skip computing the message size.
  bool uniform() const { return disjoint_.size() == 1; }

  // Canonical text; parse(format()) gives an equal table.
  std::string format() const;
  std::span<const Rule> rules() const { return rules_; }

  friend bool operator==(const Table& a, const Table& b) { return a.rules_ == b.rules_; }

 private:
  void flatten();
  std::vector<Rule> rules_;     // as written
  std::vector<Rule> disjoint_;  // sorted, non-overlapping, covers [0, inf)
};

// Whether the table sends every size to PMPI: then no size is needed and no
// team is built (a fast path the dispatcher may take before computing bytes).
inline bool pmpi_for_every_size(const Table& t) {
  return t.uniform() && t.lookup(0) == Route::pmpi;
}

}  // namespace mlxa2a::core::config::rules
