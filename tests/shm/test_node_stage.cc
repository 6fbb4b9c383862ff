// Fan-in / fan-out through NodeStage, composed into an alltoall the way the
// inter-node engine will use it: ranks place blocks into the leaders' layout,
// leaders "exchange" (here: copy in -> out), ranks pick their results out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "core/shm/node_stage.h"
#include "core/shm/strided_copy.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::shm::test {
namespace {

// Every block length up to 300: the fixed moves (powers of two to 128), the
// overlapping pairs between them (e.g. 3, 17, 33, 63) and memcpy beyond.
TEST(StridedCopy, PlacesBlocksAtStrides) {
  for (std::size_t block = 1; block <= 300; ++block) {
    const std::size_t count = 7, src_stride = block + 5, dst_stride = 3 * block + 1;
    std::vector<unsigned char> src(count * src_stride), dst(count * dst_stride + 1, 0xEE);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
    copy_blocks(dst.data(), dst_stride, src.data(), src_stride, block, count);
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t b = 0; b < dst_stride; ++b) {
        const unsigned char want = b < block ? src[i * src_stride + b] : 0xEE;
        ASSERT_EQ(dst[i * dst_stride + b], want) << "block " << block << " i " << i << " b " << b;
      }
    EXPECT_EQ(dst.back(), 0xEE);
  }
  std::vector<char> a(64, 1), b(64, 0);
  copy_blocks(b.data(), 8, a.data(), 8, 8, 8);  // contiguous fast path
  EXPECT_EQ(a, b);
}

// Contiguous runs: one memcpy, or block by block for short runs of 64- and
// 128-byte blocks (kInlineRunBytes); either way exactly the run's bytes.
TEST(StridedCopy, ContiguousRunsOfEveryLength) {
  for (std::size_t block : {std::size_t{63}, std::size_t{64}, std::size_t{128}}) {
    for (std::size_t count = 1; count <= 2 * kInlineRunBytes / block + 1; ++count) {
      std::vector<unsigned char> src(block * count), dst(block * count + 1, 0xEE);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
      copy_blocks(dst.data(), block, src.data(), block, block, count);
      ASSERT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << block << " x " << count;
      ASSERT_EQ(dst.back(), 0xEE) << block << " x " << count;
    }
  }
}

class StageTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(StageTest, LeaderAggregatedAlltoall) {
  const auto [n, nleaders] = GetParam();
  if (nleaders > n) GTEST_SKIP() << "more leaders than ranks";
  const std::size_t max_bytes = 300;
  const ForkResult res = run_forked(n, [nleaders = nleaders, max_bytes](ForkBootstrap& boot) {
    Options o;
    o.oversubscribed = true;
    o.timeout_ms = 10000;
    const int n = boot.local_size(), me = boot.local_rank();
    const std::size_t area = static_cast<std::size_t>(n) * n * max_bytes;
    std::unique_ptr<NodeStage> st;
    FT_CHECK_STATUS(NodeStage::create(boot, o, area, area, st), Status::ok);
    FT_CHECK(st->in_bytes() == area && st->out_bytes() == area);
    std::vector<int> all(static_cast<std::size_t>(n)), leaders;
    std::iota(all.begin(), all.end(), 0);
    for (int l = 0; l < nleaders; ++l) leaders.push_back(l * n / nleaders);
    int my_leader_index = -1;
    for (int l = 0; l < nleaders; ++l)
      if (leaders[l] == me) my_leader_index = l;
    for (int it = 0; it < 400; ++it) {
      const std::size_t B = 1 + (static_cast<std::size_t>(it) * 37) % max_bytes;
      std::vector<unsigned char> send(n * B), recv(n * B, 0);
      fill_send(send, me, n, it, B);
      st->begin();
      // Fan-in: block for destination d from me lands at in[(d * n + me) * B].
      copy_blocks(st->in() + me * B, n * B, send.data(), B, B, static_cast<std::size_t>(n));
      FT_CHECK_STATUS(st->arrive(), Status::ok);
      if (my_leader_index >= 0) {
        FT_CHECK_STATUS(st->wait_arrived(all), Status::ok);
        // Each leader moves the destinations it owns (the "network" step).
        const int d0 = my_leader_index * n / nleaders, d1 = (my_leader_index + 1) * n / nleaders;
        std::memcpy(st->out() + d0 * n * B, st->in() + d0 * n * B, (d1 - d0) * n * B);
        FT_CHECK_STATUS(st->release(), Status::ok);
      }
      FT_CHECK_STATUS(st->wait_released(leaders), Status::ok);
      std::memcpy(recv.data(), st->out() + me * n * B, n * B);  // fan-out
      FT_CHECK(check_recv(recv, me, n, it, B));
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

INSTANTIATE_TEST_SUITE_P(Shm, StageTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<0>(info.param)) + "_leaders" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(NodeStageFaults, DeadRankFailsTheLeader) {
  const ForkResult res = run_forked(3, [](ForkBootstrap& boot) {
    Options o;
    o.oversubscribed = true;
    std::unique_ptr<NodeStage> st;
    FT_CHECK_STATUS(NodeStage::create(boot, o, 64, 64, st), Status::ok);
    if (boot.local_rank() == 2) _exit(0);
    st->begin();
    FT_CHECK_STATUS(st->arrive(), Status::ok);
    const int all[] = {0, 1, 2}, leader[] = {0};
    if (boot.local_rank() == 0) {
      const Status s = st->wait_arrived(all);
      FT_CHECK(s == Status::peer_dead);
      return 0;
    }
    const Status s = st->wait_released(leader);  // the leader gave up: so do we
    FT_CHECK(s == Status::peer_failed || s == Status::peer_dead);
    return 0;
  }, 20);
  EXPECT_FALSE(res.hung);
  EXPECT_LT(res.seconds, 5);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// Notes are kept per parity: a leader may release call k+1 (a leader beside
// PMPI does, without a node barrier) while a rank still reads call k's
// verdict, which must still be k's; a rank's arrival note likewise.
TEST(NodeStageNotes, CallKsNoteSurvivesTheSignalOfCallKPlusOne) {
  const ForkResult res = run_forked(2, [](ForkBootstrap& boot) {
    Options o;
    o.oversubscribed = true;
    std::unique_ptr<NodeStage> st;
    FT_CHECK_STATUS(NodeStage::create(boot, o, 64, 64, st), Status::ok);
    const int leader[] = {0}, other[] = {1};
    const std::uint64_t k = st->begin(), k1 = st->begin();
    if (boot.local_rank() == 0) {
      FT_CHECK_STATUS(st->release_at(k, 5), Status::ok);
      FT_CHECK_STATUS(st->release_at(k1, 6), Status::ok);
      FT_CHECK_STATUS(st->wait_arrived(other, k1), Status::ok);
      FT_CHECK(st->arrived_note(1, k) == 7 && st->arrived_note(1, k1) == 8);
      return 0;
    }
    FT_CHECK_STATUS(st->wait_released(leader, k1), Status::ok);
    FT_CHECK(st->released_note(0, k) == 5 && st->released_note(0, k1) == 6);
    FT_CHECK_STATUS(st->arrive_at(k, 7), Status::ok);
    FT_CHECK_STATUS(st->arrive_at(k1, 8), Status::ok);
    return 0;
  }, 20);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::shm::test
