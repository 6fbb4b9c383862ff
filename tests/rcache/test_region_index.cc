// The address index on its own: slots that carry the whole hit, keyless probing,
// two-granule regions, tombstones, rebuilds, access filtering and overlap visits,
// checked against a brute-force model.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "rcache/region_index.h"

namespace mlxa2a::rcache::test {
namespace {

using detail::IndexEntry;
using detail::RegionIndex;

IndexEntry entry(uintptr_t start, uintptr_t end, uint32_t id, unsigned access = 1) {
  return {start, end, access, id, 1000 + id, 2000 + id, (id & 1) != 0};
}

// Brute force: every region that holds [p, p+len) with the access.
bool model_holds(const std::map<uint32_t, IndexEntry>& live, uintptr_t p, size_t len, unsigned access) {
  for (const auto& [id, e] : live) {
    if (e.start <= p && p + len <= e.end && (e.access & access) == access) return true;
  }
  return false;
}

TEST(RcacheRegionIndex, HitCopiesTheWholeEntry) {
  RegionIndex index;
  index.insert(entry(0x10000, 0x10100, 7, 3));
  IndexEntry e;
  ASSERT_TRUE(index.find(0x10010, 16, 1, &e));
  EXPECT_EQ(e.start, 0x10000u);
  EXPECT_EQ(e.end, 0x10100u);
  EXPECT_EQ(e.access, 3u);
  EXPECT_EQ(e.id, 7u);
  EXPECT_EQ(e.lkey, 1007u);
  EXPECT_EQ(e.rkey, 2007u);
  EXPECT_TRUE(e.offset_iova);
  EXPECT_FALSE(index.find(0x10010, 16, 4, &e)) << "access not held";
  EXPECT_FALSE(index.find(0x100f0, 32, 1, &e)) << "request runs past the end";
  EXPECT_FALSE(index.find(0xfff0, 32, 1, &e)) << "request starts before the region";
}

// A 256-byte region straddling a 256-byte granule boundary is entered twice; both halves
// find it, and erase removes both slots (not one slot twice).
TEST(RcacheRegionIndex, TwoGranuleRegionIsFoundFromBothHalvesAndErasedWhole) {
  RegionIndex index;
  index.insert(entry(0x10080, 0x10180, 1));
  EXPECT_EQ(index.entries(), 2u);
  IndexEntry e;
  ASSERT_TRUE(index.find(0x10080, 16, 1, &e));
  EXPECT_EQ(e.id, 1u);
  ASSERT_TRUE(index.find(0x10170, 16, 1, &e));
  EXPECT_EQ(e.id, 1u);
  index.insert(entry(0x10100, 0x10180, 2));  // same granule as the first one's second half
  index.erase(0x10080, 0x10180, 1);
  EXPECT_EQ(index.entries(), 1u);
  EXPECT_FALSE(index.find(0x10080, 16, 1, &e));
  ASSERT_TRUE(index.find(0x10170, 16, 1, &e));
  EXPECT_EQ(e.id, 2u);
}

// Random inserts and erases through several growths and in-place rebuilds (tombstone
// reuse): the index finds exactly what the model holds, and visits every overlap.
TEST(RcacheRegionIndex, ChurnMatchesModel) {
  RegionIndex index;
  std::map<uint32_t, IndexEntry> live;
  std::mt19937_64 rng(7);
  const uintptr_t base = uintptr_t{1} << 32;
  uint32_t next_id = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.size() < 2000 && (live.empty() || rng() % 3 != 0)) {
      // Non-overlapping ranges (the cache never indexes overlapping regions): one slot of
      // 64 KiB each, sizes 16 B .. 64 KiB, so some cross a granule of their level.
      uintptr_t slot = rng() % 4096;
      bool taken = false;
      for (const auto& [id, e] : live) taken = taken || (e.start >> 16) == ((base >> 16) + slot);
      if (taken) continue;
      const size_t len = size_t{16} << (rng() % 13);
      const uintptr_t start = base + (slot << 16) + ((rng() % ((uintptr_t{1} << 16) - len + 1)) & ~uintptr_t{15});
      const uint32_t id = next_id++ % (uint32_t{1} << 20);
      const IndexEntry e = entry(start, start + len, id, 1 + static_cast<unsigned>(rng() % 3));
      index.insert(e);
      live[id] = e;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      index.erase(it->second.start, it->second.end, it->first);
      live.erase(it);
    }
    if (step % 997 == 0) {
      for (const auto& [id, e] : live) {
        IndexEntry got;
        ASSERT_TRUE(index.find(e.start, e.end - e.start, e.access, &got)) << step;
        EXPECT_EQ(got.id, id);
        ASSERT_TRUE(index.find(e.end - 1, 1, e.access, &got));
        EXPECT_EQ(got.id, id);
      }
      for (int q = 0; q < 200; ++q) {
        const uintptr_t p = base + (rng() % (uintptr_t{4096} << 16));
        const size_t len = 1 + rng() % 512;
        const unsigned access = 1 + static_cast<unsigned>(rng() % 3);
        IndexEntry got;
        const bool found = index.find(p, len, access, &got);
        ASSERT_EQ(found, model_holds(live, p, len, access)) << step;
        if (found) {
          EXPECT_LE(got.start, p);
          EXPECT_GE(got.end, p + len);
          EXPECT_EQ(got.start, live.at(got.id).start);
        }
        std::set<uint32_t> visited;
        ASSERT_TRUE(index.for_overlapping(p, p + 4096, SIZE_MAX, [&](uint32_t id) { visited.insert(id); }));
        for (const auto& [id, e] : live) {
          if (e.start < p + 4096 && p < e.end) {
            EXPECT_TRUE(visited.count(id)) << step;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlxa2a::rcache::test
