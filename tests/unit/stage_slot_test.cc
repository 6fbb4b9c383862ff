#include "core/hier/stage_slot.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

using mlxa2a::hier::largest_node;
using mlxa2a::hier::limited_pmpi_slot;

constexpr std::uint64_t K = 1024, M = K * K;

TEST(StageSlot, TheDefaultLimitKeeps512KUpTo32RanksPerNodeAndHalvesAbove) {
  EXPECT_EQ(limited_pmpi_slot(512 * K, 128 * K, 64 * M, 2), 512 * K);
  EXPECT_EQ(limited_pmpi_slot(512 * K, 128 * K, 64 * M, 32), 512 * K);  // 64 MiB exactly
  EXPECT_EQ(limited_pmpi_slot(512 * K, 128 * K, 64 * M, 33), 256 * K);
  EXPECT_EQ(limited_pmpi_slot(512 * K, 128 * K, 64 * M, 128), 128 * K);
  // Never below the RDMA slot: 256 ranks would need 64K to fit.
  EXPECT_EQ(limited_pmpi_slot(512 * K, 128 * K, 64 * M, 256), 128 * K);
}

TEST(StageSlot, NoLimitOrASmallerSlotIsKept) {
  EXPECT_EQ(limited_pmpi_slot(512 * K, 128 * K, 0, 1024), 512 * K);
  EXPECT_EQ(limited_pmpi_slot(16 * K, 128 * K, 64 * M, 1024), 16 * K);
  EXPECT_EQ(limited_pmpi_slot(1 * M, 16 * K, 1 * M, 4), 64 * K);
}

TEST(StageSlot, LargestNodeCountsRanksPerNodeId) {
  EXPECT_EQ(largest_node(std::vector<int>{}), 0);
  EXPECT_EQ(largest_node(std::vector<int>{0, 0, 2, 2, 2, 5}), 3);
  EXPECT_EQ(largest_node(std::vector<int>{0, 1, 0, 1}), 2);
}

}  // namespace
