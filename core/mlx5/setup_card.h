// What the leaders of a team publish to each other in the RDMA set-up
// (rdma_setup.cc), and the checks every leader makes on what it receives:
// that the others run a build whose cards it can read (a magic and a format
// number), and that each partner's port is reachable from ours (same link
// layer and subnet, as UCX's uct_ib_iface_is_reachable) before any QP is
// connected to it - a pair on different subnets would only run its retries
// out on the first write.
//
// Contract: plain data and pure functions (no verbs calls, no state); any
// thread. The cards are exchanged as bytes between processes of possibly
// different builds: Preamble's layout never changes, Card's is named by
// kCardFormat.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/gid_choice.h"
#include "core/mlx5/resources.h"

namespace mlxa2a::mlx5 {

inline constexpr std::uint32_t kCardMagic = 0x6d6c7841;  // "Axlm" in memory: not zeros, not text
// Bump whenever Card or any later set-up round changes its layout or meaning.
// 1: before the preamble existed (round 0 was 4 bytes); 2: one QP per pair;
// 3: links carry the pair's stripes (link_rule.h), immediates a stripe bit.
inline constexpr std::uint32_t kCardFormat = 3;

// Round 0 of every set-up, the same size in every format: a leader learns the
// others' format before any round whose size could differ between builds.
struct Preamble {
  std::uint32_t magic = kCardMagic;
  std::uint32_t format = kCardFormat;
  PortOffer offer;      // link layers and InfiniBand subnets this leader offers
  char build[48] = {};  // the build's version line, cut to fit, NUL-terminated
};

// Its layout is a promise to other builds: a change here is a new protocol.
static_assert(sizeof(Preamble) == 96 && std::is_trivially_copyable_v<Preamble>);

// This build's preamble; `format` is kCardFormat except in tests
// (MLXA2A_DEBUG_CARD_FORMAT, NetOptions::debug_card_format).
Preamble make_preamble(const PortOffer& offer, std::uint32_t format) noexcept;

// Rails on separate InfiniBand subnets: the subnet every leader is to use -
// the lowest of those that every leader offering any offers - so that all
// meet on one. Not one per leader slot: a leader's partners on other nodes
// are of other slots as soon as there are three nodes and two leaders per
// node (Plan::serving), and a process has one port for all its partners.
// 0: none in common (then reachability decides, pair by pair).
std::uint64_t rail_subnet(std::span<const Preamble> all) noexcept;

// Which node a member of the leaders' group is on: leader j of node m is
// member first_rank[m] + j.
int node_of_member(std::span<const int> first_rank, int member) noexcept;

// The first member whose preamble is not ours (another magic or format), -1
// if all agree; *why names the node, both formats and both builds. Every
// leader sees the same preambles, so all decide alike.
int format_mismatch(std::span<const Preamble> all, int me, std::span<const int> first_rank,
                    std::string* why);

// What every leader publishes in round 1 (format kCardFormat).
struct Card {
  ProcessId id;
  PortAddress addr;
  std::uint32_t ok = 0;
  std::uint32_t slot = 0;
  std::uint64_t out_addr[2] = {0, 0};
  std::uint32_t rkey[2] = {0, 0};
  std::uint64_t out_bytes = 0;
  GidList gids;        // RoCE: the GIDs this leader may use (gid_choice.h)
  char hca[16] = {};   // the device's name, for messages ("mlx5_1")
};

// A port and the address it is used by: on RoCE the chosen GID candidate
// (with its subnet's prefix length), on InfiniBand the card's GID 0.
struct PortView {
  const Card* card = nullptr;
  GidCandidate gid;  // RoCE only
};

// Whether `theirs` (on node `node`) can be reached from `mine`: same link
// layer; InfiniBand: same subnet prefix (GID 0's upper 64 bits); RoCE: the
// two chosen GIDs in one subnet. false with *why naming both subnets.
bool reachable(const PortView& mine, const PortView& theirs, int node, std::string* why);

// "fe80:0:0:1" (an IB subnet prefix), "10.1.0.0/24" or "fd00:7::/64" (a RoCE
// GID's subnet), for messages.
std::string ib_subnet_text(const std::uint8_t gid[16]);
std::string gid_subnet_text(const GidCandidate& g);

}  // namespace mlxa2a::mlx5
