// Which link layer a team's leaders use (docs/hier-transports.md, "Which HCA"): a
// node may have InfiniBand and Ethernet (RoCE) ports, and an RC queue pair
// only connects ports of one link layer. Each leader says which layers its
// ACTIVE ports offer (only its open port's once its process has one); the
// team takes a layer every leader has, so a leader skips ports the other
// nodes cannot reach instead of taking the first one and failing the pair.
//
// Contract: a pure rule, no verbs calls; any thread.
#pragma once

#include <cstdint>

namespace mlxa2a::mlx5 {

enum : std::uint32_t { kLinkIb = 1, kLinkEth = 2, kLinkAny = kLinkIb | kLinkEth };

// The layer the team uses, from every member's offer (0: a member without
// RDMA, which fails the set-up anyway and is ignored here): one bit, or 0
// when the others have no layer in common. InfiniBand is preferred when
// both are common (LID routing, lossless without PFC set-up).
inline std::uint32_t agree_link_layer(const std::uint32_t* offers, int n) noexcept {
  std::uint32_t common = kLinkAny;
  for (int i = 0; i < n; ++i) {
    if (offers[i] != 0) common &= offers[i];
  }
  return common & kLinkIb ? kLinkIb : common & kLinkEth;
}

inline const char* link_layer_name(std::uint32_t layers) noexcept {
  switch (layers) {
    case kLinkIb: return "InfiniBand";
    case kLinkEth: return "Ethernet";
    case kLinkAny: return "InfiniBand and Ethernet";
    default: return "none";
  }
}

}  // namespace mlxa2a::mlx5
