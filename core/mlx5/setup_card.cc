#include "core/mlx5/setup_card.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/version/version.h"

namespace mlxa2a::mlx5 {

Preamble make_preamble(const PortOffer& offer, std::uint32_t format) noexcept {
  Preamble p;
  p.format = format;
  p.offer = offer;
  std::snprintf(p.build, sizeof p.build, "%s", core::version::kVersionLine);
  return p;
}

std::uint64_t rail_subnet(std::span<const Preamble> all) noexcept {
  std::uint64_t common[PortOffer::kMaxOffered];
  std::size_t n = 0;
  for (const Preamble& p : all) {  // the first leader offering subnets names the candidates
    if (p.offer.n_subnets == 0) continue;
    for (std::uint32_t i = 0; i < p.offer.n_subnets && i < PortOffer::kMaxOffered; ++i) {
      common[n++] = p.offer.subnets[i];
    }
    break;
  }
  auto offered_by = [](const PortOffer& o, std::uint64_t s) {
    for (std::uint32_t i = 0; i < o.n_subnets && i < PortOffer::kMaxOffered; ++i) {
      if (o.subnets[i] == s) return true;
    }
    return false;
  };
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool everyone = std::all_of(all.begin(), all.end(), [&](const Preamble& p) {
      return p.offer.n_subnets == 0 || offered_by(p.offer, common[i]);
    });
    if (everyone) common[kept++] = common[i];
  }
  if (kept == 0) return 0;
  return *std::min_element(common, common + kept);
}

int node_of_member(std::span<const int> first_rank, int member) noexcept {
  int node = -1;
  for (std::size_t m = 0; m < first_rank.size() && first_rank[m] <= member; ++m) {
    node = static_cast<int>(m);
  }
  return node;
}

namespace {

// A peer's build string, bounded whatever it sent.
std::string build_of(const Preamble& p) {
  return std::string(p.build, strnlen(p.build, sizeof p.build));
}

}  // namespace

int format_mismatch(std::span<const Preamble> all, int me, std::span<const int> first_rank,
                    std::string* why) {
  const Preamble& mine = all[static_cast<std::size_t>(me)];
  for (std::size_t m = 0; m < all.size(); ++m) {
    const Preamble& p = all[m];
    if (p.magic == mine.magic && p.format == mine.format) continue;
    const std::string node = std::to_string(node_of_member(first_rank, static_cast<int>(m)));
    if (p.magic != kCardMagic) {
      *why = "the set-up card of node " + node + "'s leader is not an mlxa2a card (magic " +
             std::to_string(p.magic) + "): an older mlxa2a or another program; ours is " +
             build_of(mine);
    } else {
      *why = "set-up card of node " + node + " has format " + std::to_string(p.format) +
             ", ours " + std::to_string(mine.format) + " (" + build_of(p) + " there, " +
             build_of(mine) + " here): the nodes run different builds";
    }
    return static_cast<int>(m);
  }
  return -1;
}

std::string ib_subnet_text(const std::uint8_t gid[16]) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%x:%x:%x:%x", gid[0] << 8 | gid[1], gid[2] << 8 | gid[3],
                gid[4] << 8 | gid[5], gid[6] << 8 | gid[7]);
  return buf;
}

std::string gid_subnet_text(const GidCandidate& g) {
  std::uint8_t net[16];
  std::memcpy(net, g.raw, sizeof net);
  for (int bit = g.prefix; bit < 128; ++bit) {
    net[bit / 8] &= static_cast<std::uint8_t>(~(0x80 >> (bit % 8)));  // the host part off
  }
  static constexpr std::uint8_t kV4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char text[INET6_ADDRSTRLEN] = {};
  const bool v4 = std::memcmp(net, kV4, sizeof kV4) == 0 && g.prefix >= 96;
  if (!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? net + 12 : net, text, sizeof text)) return "?";
  return std::string(text) + "/" + std::to_string(v4 ? g.prefix - 96 : g.prefix);
}

bool reachable(const PortView& mine, const PortView& theirs, int node, std::string* why) {
  const Card& a = *mine.card;
  const Card& b = *theirs.card;
  const std::string who = "node " + std::to_string(node) + "'s leader " +
                          std::string(b.hca, strnlen(b.hca, sizeof b.hca));
  const std::string us = std::string(a.hca, strnlen(a.hca, sizeof a.hca));
  if (a.addr.roce != b.addr.roce) {
    *why = who + " is on " + (b.addr.roce ? "Ethernet" : "InfiniBand") + " and ours (" + us +
           ") on " + (a.addr.roce ? "Ethernet" : "InfiniBand") + ": no common link layer";
    return false;
  }
  if (!a.addr.roce) {
    if (std::memcmp(a.addr.gid, b.addr.gid, 8) == 0) return true;
    *why = who + " is on subnet " + ib_subnet_text(b.addr.gid) + " and ours (" + us + ") on " +
           ib_subnet_text(a.addr.gid) + ": no common subnet";
    return false;
  }
  if (same_subnet(mine.gid, theirs.gid)) return true;
  *why = who + " is on subnet " + gid_subnet_text(theirs.gid) + " and ours (" + us + ") on " +
         gid_subnet_text(mine.gid) + ": no common subnet";
  return false;
}

}  // namespace mlxa2a::mlx5
