// Which GID a RoCE leader addresses its port by (docs/hier.md, "Which
// GID"). A port's table often holds several routable GIDs (VLANs, macvlan,
// several IPs, IPv6): the first IPv4-mapped one can sit on a subnet the
// other nodes do not share, and packets to it are never routed. Each leader
// publishes its candidates at set-up; every leader then computes, from the
// same cards, which candidate each member uses - the first that shares a
// subnet with some candidate of every other member - so both ends of each
// pair agree without another round.
//
// Contract: pure, no verbs calls; any thread.
#pragma once

#include <cstdint>

namespace mlxa2a::mlx5 {

// A RoCE v2 GID a port may be addressed by, with the subnet it is in (the
// first `prefix` of its 128 bits; IPv4-mapped /24 and IPv6 /64 assumed: the
// netdev's own prefix length is not read). prefix 0: forced, matches all.
struct GidCandidate {
  std::uint8_t raw[16] = {};
  std::int32_t index = -1;
  std::int32_t prefix = 128;
};
inline constexpr int kMaxGidCandidates = 4;

// Plain bytes, part of a set-up card.
struct GidList {
  std::uint32_t n = 0;
  GidCandidate e[kMaxGidCandidates];
};

inline bool same_subnet(const GidCandidate& a, const GidCandidate& b) noexcept {
  const int bits = a.prefix < b.prefix ? a.prefix : b.prefix;
  for (int bit = 0; bit < bits; ++bit) {
    const int mask = 0x80 >> (bit % 8);
    if ((a.raw[bit / 8] & mask) != (b.raw[bit / 8] & mask)) return false;
  }
  return true;
}

// The candidate member m uses, given every member's list (n == 0: no RoCE,
// ignored); *matched false when none shares a subnet with everyone (then
// its first). -1 when m has none.
inline int choose_gid(const GidList* lists, int members, int m, bool* matched) noexcept {
  *matched = false;
  if (lists[m].n == 0) return -1;
  for (std::uint32_t k = 0; k < lists[m].n; ++k) {
    bool all = true;
    for (int q = 0; q < members && all; ++q) {
      if (q == m || lists[q].n == 0) continue;
      bool any = false;
      for (std::uint32_t j = 0; j < lists[q].n && !any; ++j) {
        any = same_subnet(lists[m].e[k], lists[q].e[j]);
      }
      all = any;
    }
    if (all) {
      *matched = true;
      return static_cast<int>(k);
    }
  }
  return 0;
}

}  // namespace mlxa2a::mlx5
