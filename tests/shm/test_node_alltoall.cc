// Multi-process tests of NodeAlltoall: ranks are forked processes of one node.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/shm/node_alltoall.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::shm::test {
namespace {

// Waits in tests are bounded: a bug shows up as a failure, not a hung suite.
Options test_options() {
  Options o;
  o.timeout_ms = 10000;
  o.oversubscribed = true;  // up to 8 ranks on 2 shared cores
  return o;
}

// Runs `iters` calls at `bytes`, each with fresh contents; the recv buffer is
// poisoned before each call so stale data cannot pass the check, and guard
// zones on both sides of both buffers must come back untouched.
int exchange(NodeAlltoall& a2a, int iters, std::size_t bytes, int iter_base = 0) {
  constexpr std::size_t kGuard = 64;
  const int n = a2a.local_size();
  const int me = a2a.local_rank();
  const std::size_t total = n * bytes;
  // +1: data() of an empty vector may be null, which memcpy must not get.
  std::vector<unsigned char> send(total + 1), sbuf(total + 2 * kGuard, 0x5C);
  std::vector<unsigned char> recv(total + 1), rbuf(total + 2 * kGuard);
  for (int it = 0; it < iters; ++it) {
    fill_send(send, me, n, iter_base + it, bytes);
    std::memcpy(sbuf.data() + kGuard, send.data(), total);
    std::memset(rbuf.data(), 0xA5, rbuf.size());
    FT_CHECK_STATUS(a2a.run(sbuf.data() + kGuard, rbuf.data() + kGuard, bytes), Status::ok);
    std::memcpy(recv.data(), rbuf.data() + kGuard, total);
    FT_CHECK(check_recv(recv, me, n, iter_base + it, bytes));
    for (std::size_t g = 0; g < kGuard; ++g) {
      FT_CHECK(rbuf[g] == 0xA5 && rbuf[kGuard + total + g] == 0xA5);
      FT_CHECK(sbuf[g] == 0x5C && sbuf[kGuard + total + g] == 0x5C);
    }
    FT_CHECK(std::memcmp(sbuf.data() + kGuard, send.data(), total) == 0);  // send is input only
  }
  return 0;
}

// Engine configurations: line mode for small calls (the default), every
// call through the slots, and line mode plus CMA from 4 KiB.
enum class Mode { lines, slots_only, cma };

class SizesTest : public ::testing::TestWithParam<std::tuple<int, Mode>> {};

TEST_P(SizesTest, EveryByteArrives) {
  const auto [n, mode] = GetParam();
  const ForkResult res = run_forked(n, [mode = mode](ForkBootstrap& boot) {
    const bool cma = mode == Mode::cma;
    Options o = test_options();
    o.oversubscribed = false;  // so that cma_threshold applies
    o.spin_iterations = 50;    // still up to 8 ranks on 2 cores: yield soon
    o.cma_threshold = cma ? 4096 : 0;
    o.line_mode = mode != Mode::slots_only;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    FT_CHECK(a2a->cma_enabled() == (cma && boot.local_size() > 1));
    const std::size_t n_peers = static_cast<std::size_t>(boot.local_size() - 1);
    // Line mode: blocks up to 256 bytes whose n - 1 blocks fit 64 lines.
    FT_CHECK(a2a->line_max() ==
             (o.line_mode && n_peers != 0 ? std::min<std::size_t>(256, 3584 / n_peers) : 0));
    const std::size_t sizes[] = {0,   1,   3,   8,    13,   55,   56,    57,     64,     100,
                                 255, 256, 257, 1000, 4096, 8191, 65539, 262144, 1 << 20};
    int base = 0;
    for (std::size_t bytes : sizes) {
      if (cma && boot.local_size() > 1 && bytes >= 4096) FT_CHECK(a2a->path_for(bytes) == Path::cma);
      if (bytes != 0 && bytes <= a2a->line_max()) FT_CHECK(a2a->path_for(bytes) == Path::line);
      const int iters = bytes >= 65536 ? 2 : 8;
      if (exchange(*a2a, iters, bytes, base) != 0) return 1;
      base += iters;
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int r = 0; r < n; ++r) EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Shm, SizesTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(Mode::lines, Mode::slots_only,
                                                              Mode::cma)),
                         [](const auto& info) {
                           const Mode m = std::get<1>(info.param);
                           return "np" + std::to_string(std::get<0>(info.param)) +
                                  (m == Mode::lines ? "_lines" : m == Mode::cma ? "_cma" : "_slots");
                         });

// Calls alternate between line mode, the slots and CMA on one instance, and
// the slot calls carry 0xFF bytes, which read as a sequence word would say
// "every call is ready". A line-mode reader must still wait for this call's
// own lines (at np=3 a block can start past line 0, so only the per-line
// words guard it).
TEST(NodeAlltoall, ModesNeverMistakeDataForSequenceWords) {
  const ForkResult res = run_forked(3, [](ForkBootstrap& boot) {
    Options o = test_options();
    o.cma_threshold_oversubscribed = 8192;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    const int n = boot.local_size(), me = boot.local_rank();
    FT_CHECK(a2a->path_for(100) == Path::line && a2a->path_for(2000) == Path::copy &&
             a2a->path_for(9000) == Path::cma);
    for (int it = 0; it < 600; ++it) {
      // copy, line, line, cma, line, line, ...: every slot call is followed,
      // two calls later (same parity), by a line-mode call.
      const std::size_t bytes = it % 3 != 0 ? 100 : it % 6 == 0 ? 2000 : 9000;
      std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
      if (bytes == 100) {
        fill_send(send, me, n, it, bytes);
        FT_CHECK_STATUS(a2a->run(send.data(), recv.data(), bytes), Status::ok);
        FT_CHECK(check_recv(recv, me, n, it, bytes));
      } else {
        std::fill(send.begin(), send.end(), 0xFF);
        FT_CHECK_STATUS(a2a->run(send.data(), recv.data(), bytes), Status::ok);
        FT_CHECK(std::all_of(recv.begin(), recv.end(), [](unsigned char c) { return c == 0xFF; }));
      }
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// A slot far smaller than the data forces many pipelined rounds with a short
// last round; odd sizes catch chunk-boundary bugs.
TEST(NodeAlltoall, TinySlotPipelines) {
  const ForkResult res = run_forked(3, [](ForkBootstrap& boot) {
    Options o = test_options();
    // test_options() is oversubscribed: that slot size applies; raised to
    // the minimum, 64 bytes per rank.
    o.slot_capacity_oversubscribed = 1;
    o.cma_threshold_oversubscribed = 0;
    o.line_mode = false;  // small sizes through the slots too
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    FT_CHECK(a2a->slot_capacity() == 192);
    int base = 0;
    for (std::size_t bytes : {1, 63, 64, 65, 127, 1000, 4099}) {
      if (exchange(*a2a, 3, bytes, base) != 0) return 1;
      base += 3;
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// Thousands of calls with no barrier in between, sizes and buffers changing
// every call: exercises slot reuse by parity under oversubscription.
TEST(NodeAlltoall, BackToBackCalls) {
  const ForkResult res = run_forked(5, [](ForkBootstrap& boot) {
    Options o = test_options();
    o.cma_threshold = 2048;
    o.oversubscribed = false;
    o.spin_iterations = 50;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    const int n = boot.local_size(), me = boot.local_rank();
    std::vector<unsigned char> send[2], recv[2];
    for (int it = 0; it < 3000; ++it) {
      // Mostly small (the latency path), now and then a CMA-sized call.
      const std::size_t bytes = it % 97 == 0 ? 3000 : static_cast<std::size_t>(it % 9) * 7 + 1;
      auto& s = send[it & 1];
      auto& r = recv[it & 1];
      s.assign(n * bytes, 0);
      r.assign(n * bytes, 0);
      fill_send(s, me, n, it, bytes);
      FT_CHECK_STATUS(a2a->run(s.data(), r.data(), bytes), Status::ok);
      FT_CHECK(check_recv(r, me, n, it, bytes));
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// A 0-byte call through a given path (run()'s path argument, measured
// selection) moves nothing and leaves the instance in step: line mode cannot
// take it (it would poll lines up to (0 - 1) / 56), so it runs as path_for(0).
TEST(NodeAlltoall, EmptyCallThroughAnyPath) {
  for (int np : {2, 3}) {
    const ForkResult res = run_forked(np, [](ForkBootstrap& boot) {
      Options o = test_options();
      o.oversubscribed = false;
      o.spin_iterations = 50;
      std::unique_ptr<NodeAlltoall> a2a;
      FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
      FT_CHECK(!a2a->can_take(Path::line, 0));
      std::vector<unsigned char> send(64), recv(64);
      int it = 0;
      for (const Path path : {Path::line, Path::copy, Path::line, Path::local}) {
        FT_CHECK_STATUS(a2a->run(send.data(), recv.data(), 0, path), Status::ok);
        const int n = boot.local_size(), me = boot.local_rank();
        send.assign(static_cast<std::size_t>(n) * 8, 0);
        recv.assign(send.size(), 0);
        fill_send(send, me, n, it, 8);
        FT_CHECK_STATUS(a2a->run(send.data(), recv.data(), 8), Status::ok);
        FT_CHECK(check_recv(recv, me, n, it++, 8));
      }
      return 0;
    });
    EXPECT_FALSE(res.hung) << "np " << np;
    for (int code : res.exit_codes) EXPECT_EQ(code, 0) << "np " << np;
  }
}

TEST(NodeAlltoall, TwoInstancesInterleaved) {
  const ForkResult res = run_forked(3, [](ForkBootstrap& boot) {
    Options o = test_options();
    o.oversubscribed = false;
    o.cma_threshold = 1024;
    std::unique_ptr<NodeAlltoall> a, b;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a), Status::ok);
    o.slot_capacity = 4096;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, b), Status::ok);
    FT_CHECK(a->segment_name() != b->segment_name() || boot.local_rank() != 0);
    for (int it = 0; it < 50; ++it) {
      if (exchange(*a, 1, 5 + it, it) != 0) return 1;
      if (exchange(*b, 1, it % 2 ? 2000 : 40, 1000 + it) != 0) return 1;
    }
    a.reset();  // destruction is local: b keeps working
    return exchange(*b, 10, 777);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// The path and the slot depend on the layout: with ranks outnumbering cores
// CMA starts at a larger size and the slot is the oversubscribed one. Also
// checks the oversubscribed CMA path moves data right.
TEST(NodeAlltoall, OversubscribedUsesItsThresholdAndSlot) {
  const ForkResult res = run_forked(4, [](ForkBootstrap& boot) {
    Options o = test_options();
    o.cma_threshold = 1024;
    o.cma_threshold_oversubscribed = 65536;
    o.slot_capacity = 4096;
    o.slot_capacity_oversubscribed = 8192;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    FT_CHECK(a2a->slot_capacity() == 8192);
    FT_CHECK(a2a->path_for(65535) == Path::copy);
    FT_CHECK(a2a->path_for(65536) == Path::cma);
    if (exchange(*a2a, 3, 65536) != 0) return 1;
    return exchange(*a2a, 3, 2000, 3);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// Layout options differ between ranks: rank 0's win everywhere, so all ranks
// take the same path for every size (a mismatch would deadlock or corrupt).
TEST(NodeAlltoall, RankZeroLayoutOptionsWin) {
  const ForkResult res = run_forked(3, [](ForkBootstrap& boot) {
    Options o = test_options();
    o.oversubscribed = boot.local_rank() == 1;
    o.slot_capacity = boot.local_rank() == 0 ? 4096 : 1 << 20;
    o.cma_threshold = boot.local_rank() == 0 ? 2048 : 0;
    o.cma_threshold_oversubscribed = 0;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    FT_CHECK(a2a->slot_capacity() == 4096);
    FT_CHECK(a2a->path_for(2047) == Path::copy && a2a->path_for(2048) == Path::cma);
    int base = 0;
    for (std::size_t bytes : {1, 1365, 1366, 2047, 2048, 5000}) {
      if (exchange(*a2a, 2, bytes, base) != 0) return 1;
      base += 2;
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::shm::test
