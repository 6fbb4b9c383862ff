// The zero-copy gather lists (core/mlx5/gather.h): the SGEs for the message to
// node m must read exactly the bytes the fan-in copy puts in the in-area's
// section m (core/hier/plan.h; rows rotated by source from 64-byte chunks,
// core/hier/rows.h), in the same order, and split_wrs must cover them once
// within max_sge / max_bytes. Pure computation: no verbs calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/mlx5/gather.h"

namespace mlxa2a::mlx5 {
namespace {

struct Layout {
  const char* name;
  std::vector<int> node_of;  // node per team rank
};

std::vector<int> members(const std::vector<int>& node_of, int node) {
  std::vector<int> m;
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r) {
    if (node_of[static_cast<std::size_t>(r)] == node) m.push_back(r);
  }
  return m;
}

// Sends node 0's message to every other node through the SGEs and compares it
// with the in-area section built by definition: row a holds source a's blocks
// for the node's members b, from 64-byte chunks rotated by a (slot
// (a + b) % L_m), below that in member order.
void check_layout(const Layout& l, std::size_t bpp, std::size_t offset, std::size_t chunk,
                  std::size_t misalign, std::size_t want_sges) {
  const int n = static_cast<int>(l.node_of.size());
  const std::vector<int> local = members(l.node_of, 0);
  // Every send buffer at an odd offset inside a larger allocation with guard
  // bytes around it; the SGEs must never reach them.
  const std::size_t bytes = static_cast<std::size_t>(n) * bpp;
  std::vector<std::vector<unsigned char>> mem(local.size());
  std::vector<SendBuffer> src(local.size());
  for (std::size_t a = 0; a < local.size(); ++a) {
    mem[a].assign(bytes + misalign + 64, 0xEE);
    unsigned char* p = mem[a].data() + misalign;
    for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(a * 131 + i * 7 + 1);
    src[a] = {reinterpret_cast<std::uintptr_t>(p), static_cast<std::uint32_t>(100 + a)};
  }
  const int nodes = *std::max_element(l.node_of.begin(), l.node_of.end()) + 1;
  for (int m = 1; m < nodes; ++m) {
    const std::vector<int> dest = members(l.node_of, m);
    std::vector<unsigned char> want;
    const std::size_t lm = dest.size();
    const bool rotated = chunk >= 64 && lm > 1;
    for (std::size_t a = 0; a < local.size(); ++a) {
      const unsigned char* p = mem[a].data() + misalign;
      for (std::size_t slot = 0; slot < lm; ++slot) {
        const std::size_t b = rotated ? (slot + lm - a % lm) % lm : slot;
        const unsigned char* blk = p + static_cast<std::size_t>(dest[b]) * bpp + offset;
        want.insert(want.end(), blk, blk + chunk);
      }
    }
    std::vector<ibv_sge> sges;
    gather_message(src, dest, bpp, offset, chunk, &sges);
    // The transport lists one source at a time (its row first_source).
    std::vector<ibv_sge> each, one;
    for (std::size_t a = 0; a < local.size(); ++a) {
      gather_message({&src[a], 1}, dest, bpp, offset, chunk, &one, a);
      each.insert(each.end(), one.begin(), one.end());
    }
    ASSERT_EQ(each.size(), sges.size()) << l.name << " node " << m;
    for (std::size_t i = 0; i < sges.size(); ++i) {
      EXPECT_EQ(each[i].addr, sges[i].addr);
      EXPECT_EQ(each[i].length, sges[i].length);
    }
    std::vector<unsigned char> got;
    for (const ibv_sge& s : sges) {
      // lkey must be the one of the buffer the SGE lies in.
      bool inside = false;
      for (const SendBuffer& b : src) {
        if (s.addr >= b.addr && s.addr + s.length <= b.addr + bytes) {
          inside = true;
          EXPECT_EQ(s.lkey, b.lkey);
        }
      }
      ASSERT_TRUE(inside) << l.name << ": SGE outside every send buffer";
      const auto* p = reinterpret_cast<const unsigned char*>(static_cast<std::uintptr_t>(s.addr));
      got.insert(got.end(), p, p + s.length);
    }
    EXPECT_EQ(got, want) << l.name << " node " << m;
    EXPECT_EQ(sges.size(), want_sges) << l.name << " node " << m;
  }
}

TEST(Gather, BlockLayoutOneRoundIsOneSgePerRun) {
  // Node 0 = ranks 0..2, node 1 = 3..5: a source's blocks for node 1 follow
  // on; rows 1 and 2 are rotated (destinations 2 | 0 1 and 1 2 | 0): 1+2+2.
  check_layout({"block", {0, 0, 0, 1, 1, 1}}, 1000, 0, 1000, 3, 5);
  // Below 64 bytes: in member order, one SGE per source.
  check_layout({"block small", {0, 0, 0, 1, 1, 1}}, 63, 0, 63, 3, 3);
}

TEST(Gather, BlockLayoutInRoundsIsOneSgePerBlock) {
  check_layout({"block rounds", {0, 0, 0, 1, 1, 1}}, 1000, 512, 488, 17, 9);
}

TEST(Gather, RoundRobinIsOneSgePerBlock) {
  check_layout({"round robin", {0, 1, 0, 1, 0, 1}}, 4096, 0, 4096, 1, 9);
}

TEST(Gather, IrregularLayoutMergesOnlyNeighbours) {
  // Node 1 = ranks 1, 4, 5: 4 and 5 merge where they follow each other in
  // the row (rows 0 and 2: 1 4 5 -> 2 SGEs, 4 5 1 -> 2), not in row 1 (5 1 4).
  check_layout({"irregular", {0, 1, 0, 0, 1, 1}}, 64, 0, 64, 1, 7);
  check_layout({"irregular small", {0, 1, 0, 0, 1, 1}}, 63, 0, 63, 1, 6);
}

TEST(Gather, EmptyChunkIsEmpty) {
  std::vector<ibv_sge> sges{{1, 1, 1}};
  const SendBuffer b{4096, 7};
  const int dest[] = {1};
  gather_message({&b, 1}, dest, 64, 0, 0, &sges);
  EXPECT_TRUE(sges.empty());
}

TEST(Gather, HugeBlocksAreCutAtTheSgeBound) {
  // Addresses only (nothing is read): a 2.5 GiB block.
  const std::size_t chunk = kMaxSgeBytes * 5 / 2;
  const SendBuffer b{std::uint64_t{1} << 40, 9};
  const int dest[] = {0};
  std::vector<ibv_sge> sges;
  gather_message({&b, 1}, dest, chunk, 0, chunk, &sges);
  ASSERT_EQ(sges.size(), 3u);
  std::uint64_t at = b.addr;
  for (const ibv_sge& s : sges) {
    EXPECT_LE(s.length, kMaxSgeBytes);
    EXPECT_EQ(s.addr, at);
    at += s.length;
  }
  EXPECT_EQ(at - b.addr, chunk);
}

TEST(Gather, SplitCoversEverySgeOnceWithinTheLimits) {
  std::vector<ibv_sge> sges;
  for (std::uint32_t i = 0; i < 37; ++i) sges.push_back({std::uint64_t{i} * 100, 10 + i, i});
  const std::uint64_t total =
      std::accumulate(sges.begin(), sges.end(), std::uint64_t{0},
                      [](std::uint64_t t, const ibv_sge& s) { return t + s.length; });
  for (std::uint32_t max_sge : {0u, 1u, 2u, 3u, 30u, 64u}) {
    for (std::uint64_t max_bytes : {std::uint64_t{1}, std::uint64_t{100}, kMaxSgeBytes}) {
      std::vector<WrSpan> wrs;
      split_wrs(sges, max_sge, max_bytes, &wrs);
      std::size_t next = 0;
      std::uint64_t offset = 0;
      for (const WrSpan& w : wrs) {
        EXPECT_EQ(w.first_sge, next);
        EXPECT_GE(w.num_sge, 1u);
        EXPECT_LE(w.num_sge, std::max(max_sge, 1u));
        EXPECT_EQ(w.offset, offset);
        std::uint64_t b = 0;
        for (std::size_t i = w.first_sge; i < w.first_sge + w.num_sge; ++i) b += sges[i].length;
        EXPECT_EQ(w.bytes, b);
        if (w.num_sge > 1) {
          EXPECT_LE(w.bytes, max_bytes);
        }
        next += w.num_sge;
        offset += w.bytes;
      }
      EXPECT_EQ(next, sges.size());
      EXPECT_EQ(offset, total);
    }
  }
}

}  // namespace
}  // namespace mlxa2a::mlx5
