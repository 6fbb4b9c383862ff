#include "core/config/leaders.h"

#include <algorithm>
#include <charconv>

namespace mlxa2a::core::config {

std::optional<LeaderPolicy> LeaderPolicy::parse(std::string_view text) {
  if (text == "rails") return LeaderPolicy{};
  if (text == "node") return LeaderPolicy{Kind::Node, 1};
  if (text == "numa") return LeaderPolicy{Kind::Numa, 1};
  if (text == "socket") return LeaderPolicy{Kind::Socket, 1};
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 1024) {
    return std::nullopt;
  }
  return LeaderPolicy{Kind::Count, n};
}

std::string LeaderPolicy::format() const {
  switch (kind) {
    case Kind::Node:
      return "node";
    case Kind::Rails:
      return "rails";
    case Kind::Numa:
      return "numa";
    case Kind::Socket:
      return "socket";
    case Kind::Count:
      return std::to_string(count);
  }
  return "rails";
}

std::vector<int> choose_leaders(const LeaderPolicy& policy, std::span<const int> domain_of) {
  const int size = static_cast<int>(domain_of.size());
  std::vector<int> leaders;
  if (size == 0) return leaders;
  switch (policy.kind) {
    case LeaderPolicy::Kind::Node:
    case LeaderPolicy::Kind::Rails:  // without the ranks' rails: one (choose_rail_leaders)
      leaders.push_back(0);
      break;
    case LeaderPolicy::Kind::Count: {
      const int n = std::min(policy.count, size);
      for (int j = 0; j < n; ++j)
        leaders.push_back(static_cast<int>(static_cast<long>(j) * size / n));
      break;
    }
    case LeaderPolicy::Kind::Numa:
    case LeaderPolicy::Kind::Socket: {
      // The first rank of each domain; rank 0's domain therefore leads first.
      std::vector<int> seen;
      for (int i = 0; i < size; ++i) {
        const int d = domain_of[static_cast<std::size_t>(i)];
        if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;
        seen.push_back(d);
        leaders.push_back(i);
      }
      break;
    }
  }
  return leaders;
}

std::vector<int> choose_rail_leaders(std::span<const int> rail_of) {
  std::vector<int> leaders, rails;
  for (int i = 0; i < static_cast<int>(rail_of.size()); ++i) {
    const int r = rail_of[static_cast<std::size_t>(i)];
    if (i == 0 || (r >= 0 && std::find(rails.begin(), rails.end(), r) == rails.end())) {
      leaders.push_back(i);
      rails.push_back(r);
    }
  }
  return leaders;
}

int proposed_rail(int local_rank, int size, int rails) {
  if (rails < 2 || size < 1 || local_rank < 0) return -1;
  return static_cast<int>(static_cast<long>(local_rank) * rails / size);
}

}  // namespace mlxa2a::core::config
