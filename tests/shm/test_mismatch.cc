// Cross-rank size mismatch (issue 11): ranks that call NodeAlltoall::run with
// different bytes_per_peer (an erroneous MPI program: mismatched type
// signatures) must all end the call with Status::size_mismatch in bounded
// time - never hang, never read past a peer's blocks, never return wrong data
// as success - and after agreeing on a restart point (resync) the instance
// serves correct calls again.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "core/shm/node_alltoall.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::shm::test {
namespace {

// The element-wise maximum of every rank's sync point, gathered with one
// broadcast per rank (the test's stand-in for the MPI allreduce).
bool agree(ForkBootstrap& boot, NodeAlltoall& a2a) {
  std::array<std::uint64_t, 2> agreed = a2a.sync_point();
  for (int root = 0; root < boot.local_size(); ++root) {
    std::array<std::uint64_t, 2> p = a2a.sync_point();
    if (!boot.broadcast(p.data(), sizeof p, root)) return false;
    agreed[0] = std::max(agreed[0], p[0]);
    agreed[1] = std::max(agreed[1], p[1]);
  }
  a2a.resync(agreed);
  return true;
}

// One call of `bytes` per peer with guard zones; checks data when `expect`
// is ok. The send buffer is exactly n * bytes long (with guards), so reading
// past a peer's blocks would show up under the sanitizer build.
int call(NodeAlltoall& a2a, std::size_t bytes, int iter, Status expect) {
  constexpr std::size_t kGuard = 64;
  const int n = a2a.local_size();
  const int me = a2a.local_rank();
  const std::size_t total = static_cast<std::size_t>(n) * bytes;
  std::vector<unsigned char> send(total + 1), sbuf(total + 2 * kGuard, 0x5C);
  std::vector<unsigned char> rbuf(total + 2 * kGuard, 0xA5), recv(total + 1);
  fill_send(send, me, n, iter, bytes);
  std::memcpy(sbuf.data() + kGuard, send.data(), total);
  FT_CHECK_STATUS(a2a.run(sbuf.data() + kGuard, rbuf.data() + kGuard, bytes), expect);
  for (std::size_t g = 0; g < kGuard; ++g) {
    FT_CHECK(rbuf[g] == 0xA5 && rbuf[kGuard + total + g] == 0xA5);
  }
  if (expect == Status::ok) {
    std::memcpy(recv.data(), rbuf.data() + kGuard, total);
    FT_CHECK(check_recv(recv, me, n, iter, bytes));
  }
  return 0;
}

struct Case {
  int n;
  std::size_t odd_bytes;    // the last rank's size
  std::size_t other_bytes;  // everybody else's
  bool oversubscribed;
};

class MismatchTest : public ::testing::TestWithParam<Case> {};

TEST_P(MismatchTest, EveryRankFailsThenTheInstanceWorks) {
  const Case c = GetParam();
  const ForkResult r = run_forked(c.n, [&](ForkBootstrap& boot) {
    Options o;
    o.timeout_ms = 20000;  // a hang fails, it does not block the suite
    o.oversubscribed = c.oversubscribed;
    o.cma_threshold = 65536;
    o.cma_threshold_oversubscribed = 65536;
    o.slot_capacity = 16384;  // large sizes run several rounds
    o.slot_capacity_oversubscribed = 16384;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    // A correct call first, so the mismatch hits a warmed-up instance.
    FT_CHECK(call(*a2a, 64, 1, Status::ok) == 0);
    const bool odd = boot.local_rank() == c.n - 1;
    for (int round = 0; round < 2; ++round) {
      FT_CHECK(call(*a2a, odd ? c.odd_bytes : c.other_bytes, 2, Status::size_mismatch) == 0);
      FT_CHECK(agree(boot, *a2a));
      // Correct calls on every path afterwards.
      for (std::size_t bytes : {0, 8, 200, 4096, 40000, 70000}) {
        FT_CHECK(call(*a2a, bytes, 3 + round, Status::ok) == 0);
      }
    }
    return 0;
  }, 60);
  EXPECT_FALSE(r.hung) << "some rank did not return";
  for (std::size_t i = 0; i < r.exit_codes.size(); ++i) EXPECT_EQ(r.exit_codes[i], 0) << "rank " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shm, MismatchTest,
    ::testing::Values(Case{2, 16, 8, false},        // line vs line (the words' tags)
                      Case{2, 8, 16, true},         // line vs line, oversubscribed
                      Case{3, 48, 16, false},       // line, the odd stream longer
                      Case{2, 100, 8, false},       // line (3 lines) vs one-line pair path
                      Case{2, 1024, 8, false},      // copy vs line
                      Case{3, 8, 0, false},         // line vs an empty call
                      Case{2, 0, 4096, true},       // an empty call vs copy
                      Case{2, 2048, 1024, false},   // copy vs copy (slot header)
                      Case{3, 40000, 12000, true},  // several rounds vs one
                      Case{2, 131072, 65536, false},  // CMA vs CMA
                      Case{3, 65536, 32768, true},    // CMA vs copy
                      Case{4, 8, 70000, true}));      // line vs CMA

}  // namespace
}  // namespace mlxa2a::shm::test
