// Segment and staging geometry with hostile sizes (issue 11): every product
// that would wrap makes set-up fail cleanly, on every rank alike, instead of
// mapping a small segment and writing far past it.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "core/hier/hier_alltoall.h"
#include "core/hier/plan.h"
#include "core/shm/layout.h"
#include "core/shm/node_alltoall.h"
#include "core/shm/node_stage.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::shm::test {
namespace {

using layout::Size;

TEST(Geometry, CheckedSizeArithmetic) {
  EXPECT_EQ((Size(3) * 4 + 5).value(), 17u);
  EXPECT_EQ(Size(130).round_up(128).value(), 256u);
  EXPECT_FALSE((Size(SIZE_MAX) + 1).ok());
  EXPECT_FALSE((Size(SIZE_MAX / 2 + 1) * 2).ok());
  EXPECT_FALSE(Size(SIZE_MAX - 3).round_up(128).ok());
  EXPECT_EQ((Size(SIZE_MAX) * 2 + 0).value(), 0u);  // poisoned stays poisoned
}

TEST(Geometry, AlltoallGeometryOverflowIsInvalid) {
  // The old arithmetic: round_up(8 + SIZE_MAX, 128) wrapped to 128 bytes per
  // slot, while run() believed the slot held SIZE_MAX bytes.
  for (std::size_t slot : {SIZE_MAX, SIZE_MAX - 7, std::size_t{1} << 63, SIZE_MAX / 4}) {
    EXPECT_EQ(layout::alltoall_geometry(2, slot).total, 0u) << slot;
  }
  const layout::AlltoallGeometry g = layout::alltoall_geometry(4, 131072);
  EXPECT_EQ(g.slot_stride, layout::round_up(8 + 131072, 128));
  EXPECT_EQ(g.total, g.slots_offset + 8 * g.slot_stride);
}

TEST(Geometry, HierAreaOverflowIsInvalid) {
  EXPECT_EQ(hier::HierAlltoall::area_bytes(4, 2, SIZE_MAX), 0u);
  EXPECT_EQ(hier::HierAlltoall::area_bytes(4, 2, std::size_t{1} << 63), 0u);
  // Sections plus the zero-copy trailer (docs/zerocopy.md).
  EXPECT_EQ(hier::HierAlltoall::area_bytes(4, 2, 4096),
            2u * 4 * 1024 + hier::Plan::header_bytes(4) + hier::HierAlltoall::publish_bytes(2));
  const int ids[] = {0, 0, 2, 2};
  const hier::NodeMap map(ids);
  EXPECT_EQ(hier::Plan(map, 0, SIZE_MAX).area_bytes(), 0u);
}

TEST(Geometry, HugeSlotFailsCreationOnEveryRank) {
  for (std::size_t slot : {SIZE_MAX, SIZE_MAX - 100, std::size_t{1} << 63}) {
    for (bool oversubscribed : {false, true}) {
      const ForkResult r = run_forked(3, [&](ForkBootstrap& boot) {
        Options o;
        o.timeout_ms = 10000;
        o.oversubscribed = oversubscribed;
        o.slot_capacity = slot;
        o.slot_capacity_oversubscribed = slot;
        std::unique_ptr<NodeAlltoall> a2a;
        FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::too_large);
        FT_CHECK(!a2a);
        return 0;
      });
      EXPECT_FALSE(r.hung);
      for (int code : r.exit_codes) EXPECT_EQ(code, 0) << "slot " << slot;
    }
  }
}

TEST(Geometry, HugeStageFailsCreationOnEveryRank) {
  const ForkResult r = run_forked(2, [](ForkBootstrap& boot) {
    Options o;
    o.timeout_ms = 10000;
    std::unique_ptr<NodeStage> stage;
    FT_CHECK_STATUS(NodeStage::create(boot, o, SIZE_MAX - 10, 4096, stage), Status::too_large);
    FT_CHECK_STATUS(NodeStage::create(boot, o, 4096, std::size_t{1} << 63, stage),
                    Status::too_large);
    FT_CHECK_STATUS(NodeStage::create(boot, o, 0, 4096, stage), Status::too_large);
    FT_CHECK(!stage);
    return 0;
  });
  EXPECT_FALSE(r.hung);
  for (int code : r.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::shm::test
