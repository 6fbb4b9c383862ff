#include "core/config/rules.h"

#include <algorithm>
#include <set>

#include "core/config/parse.h"

namespace mlxa2a::core::config::rules {

std::optional<Route> rule_route_from_string(std::string_view s) {
  const auto r = route_from_string(s);
  if (r && (*r == Route::auto_ || *r == Route::shm || *r == Route::rdma || *r == Route::pmpi)) {
    return r;
  }
  return std::nullopt;
}

Table::Table() : rules_{Rule{}} { flatten(); }

std::optional<Table> Table::parse(std::string_view text, std::string* error) {
  Table table;
  table.rules_.clear();
  std::string_view rest = text;
  if (trim(rest).empty()) {
    *error = "an empty tuning string (use \"auto\")";
    return std::nullopt;
  }
  while (true) {
    const std::size_t hash = rest.find('#');
    const std::string_view rule_text = trim(rest.substr(0, hash));
    const std::string where = "rule '" + std::string(rule_text) + "'";
    Rule rule;
    const std::size_t colon = rule_text.rfind(':');
    const std::string_view path_text = colon == std::string_view::npos
                                           ? rule_text
                                           : trim(rule_text.substr(colon + 1));
    const auto path = rule_route_from_string(path_text);
    if (!path) {
      *error = where + ": path must be auto, shm, rdma or pmpi";
      return std::nullopt;
    }
    rule.route = *path;
    if (colon != std::string_view::npos) {
      const std::string_view range = trim(rule_text.substr(0, colon));
      const std::size_t dash = range.find('-');
      if (dash == std::string_view::npos) {
        *error = where + ": range must be LO-HI, e.g. 0-4K or 4K-inf";
        return std::nullopt;
      }
      const auto lo = parse_size(trim(range.substr(0, dash)));
      const auto hi = parse_size(trim(range.substr(dash + 1)));
      if (!lo || !hi || *lo == kSizeInfinite) {
        *error = where + ": bounds must be sizes like 0, 512, 4K, 1M or inf (upper only)";
        return std::nullopt;
      }
      if (*lo >= *hi) {
        *error = where + ": lower bound must be below the upper bound";
        return std::nullopt;
      }
      rule.lo = *lo;
      rule.hi = *hi;
    }
    table.rules_.push_back(rule);
    if (hash == std::string_view::npos) break;
    rest = rest.substr(hash + 1);
  }
  table.flatten();
  return table;
}

void Table::flatten() {
  // Cut [0, inf) at every bound, then give each piece the path of the last rule
  // covering it. Few rules, so quadratic is fine; it runs once at start-up.
  std::set<std::uint64_t> cuts = {0};
  for (const Rule& r : rules_) {
    cuts.insert(r.lo);
    if (r.hi != UINT64_MAX) cuts.insert(r.hi);
  }
  disjoint_.clear();
  for (auto it = cuts.begin(); it != cuts.end(); ++it) {
    const auto next = std::next(it);
    Rule piece{*it, next == cuts.end() ? UINT64_MAX : *next, Route::auto_};
    for (const Rule& r : rules_) {
      if (r.lo <= piece.lo && piece.lo < r.hi) piece.route = r.route;
    }
    if (!disjoint_.empty() && disjoint_.back().route == piece.route) {
      disjoint_.back().hi = piece.hi;  // merge neighbours with the same path
    } else {
      disjoint_.push_back(piece);
    }
  }
}

std::string Table::format() const {
  std::string out;
  for (const Rule& r : rules_) {
    if (!out.empty()) out += '#';
    if (r.lo != 0 || r.hi != UINT64_MAX) {
      out += format_size(r.lo) + "-" + format_size(r.hi) + ":";
    }
    out += to_string(r.route);
  }
  return out.empty() ? std::string("auto") : out;
}

}  // namespace mlxa2a::core::config::rules
