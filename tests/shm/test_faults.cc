// Failure paths: a peer that dies or stalls, failing bootstrap, bad options.
// Each must end in an error on every rank within a bound, never a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/shm/node_alltoall.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::shm::test {
namespace {

Options fault_options() {
  Options o;
  o.oversubscribed = true;
  o.timeout_ms = 0;  // only pid checks may end the wait in PeerDies
  return o;
}

bool is_peer_error(Status s) { return s == Status::peer_dead || s == Status::peer_failed; }

TEST(NodeAlltoallFaults, PeerDiesGivesErrorNotHang) {
  for (std::size_t bytes : {std::size_t{8}, std::size_t{65536}}) {
    const ForkResult res = run_forked(3, [bytes](ForkBootstrap& boot) {
      Options o = fault_options();
      o.oversubscribed = false;
      o.cma_threshold = 32768;  // second round: the CMA path's waits
      std::unique_ptr<NodeAlltoall> a2a;
      FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
      if (boot.local_rank() == 2) _exit(0);  // dies without a word
      std::vector<char> s(3 * bytes, 1), r(3 * bytes);
      const Status st = a2a->run(s.data(), r.data(), bytes);
      FT_CHECK(is_peer_error(st));
      FT_CHECK_STATUS(a2a->run(s.data(), r.data(), bytes), Status::broken);
      return 0;
    }, 20);
    EXPECT_FALSE(res.hung) << bytes;
    EXPECT_LT(res.seconds, 5) << bytes;
    for (int code : res.exit_codes) EXPECT_EQ(code, 0) << bytes;
  }
}

TEST(NodeAlltoallFaults, StalledPeerTimesOutAndOthersLearn) {
  // Rank 1 calls only once rank 0 has timed out (told through a pipe, not a
  // sleep: under a sanitizer and a loaded CI a 600 ms head start was once not
  // enough, rank 0 was still inside its 200 ms wait when rank 1 came).
  int timed_out[2];
  ASSERT_EQ(::pipe(timed_out), 0);
  const ForkResult res = run_forked(2, [&timed_out](ForkBootstrap& boot) {
    Options o = fault_options();
    o.timeout_ms = 200;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    std::vector<char> s(2 * 16, 1), r(2 * 16);
    if (boot.local_rank() == 0) {
      FT_CHECK_STATUS(a2a->run(s.data(), r.data(), 16), Status::timeout);
      const char done = 1;
      FT_CHECK(::write(timed_out[1], &done, 1) == 1);
      std::this_thread::sleep_for(std::chrono::seconds(2));  // alive, but gone from the collective
      return 0;
    }
    char done = 0;
    FT_CHECK(::read(timed_out[0], &done, 1) == 1);
    // Rank 0 published its data before timing out, so this call may complete.
    const Status first = a2a->run(s.data(), r.data(), 16);
    FT_CHECK(first == Status::ok || first == Status::peer_failed);
    if (first == Status::ok)  // the next one cannot: rank 0 has left
      FT_CHECK_STATUS(a2a->run(s.data(), r.data(), 16), Status::peer_failed);
    return 0;
  });
  ::close(timed_out[0]);
  ::close(timed_out[1]);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

TEST(NodeAlltoallFaults, AbortCallbackEndsWait) {
  const ForkResult res = run_forked(2, [](ForkBootstrap& boot) {
    Options o = fault_options();
    int polls = 0;
    o.abort_requested = [&polls] { return ++polls >= 20; };
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    if (boot.local_rank() == 1) {  // never joins the call
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return 0;
    }
    char s[2] = {1, 2}, r[2];
    FT_CHECK_STATUS(a2a->run(s, r, 1), Status::aborted);
    FT_CHECK(polls >= 20);
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// A rank that cannot take part (e.g. no memory for its packed copy) abandons
// the instance: its peers' run() fails fast instead of waiting for it.
TEST(NodeAlltoallFaults, AbandonReleasesWaitingPeers) {
  const ForkResult res = run_forked(3, [](ForkBootstrap& boot) {
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, fault_options(), a2a), Status::ok);
    std::vector<char> s(3 * 32, 1), r(3 * 32);
    if (boot.local_rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // peers are waiting by now
      a2a->abandon();
      FT_CHECK_STATUS(a2a->run(s.data(), r.data(), 32), Status::broken);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // stays alive
      return 0;
    }
    FT_CHECK_STATUS(a2a->run(s.data(), r.data(), 32), Status::peer_failed);
    return 0;
  }, 20);
  EXPECT_FALSE(res.hung);
  EXPECT_LT(res.seconds, 5);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

TEST(NodeAlltoallFaults, BootstrapFailureFailsEverywhere) {
  const ForkResult res = run_forked(3, [](ForkBootstrap& boot) {
    boot.fail_broadcast = boot.local_rank() == 1;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, fault_options(), a2a), Status::bootstrap_failed);
    FT_CHECK(a2a == nullptr);
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

TEST(NodeAlltoallFaults, BadPrefixFailsEverywhere) {
  const ForkResult res = run_forked(2, [](ForkBootstrap& boot) {
    Options o = fault_options();
    o.name_prefix = "bad/prefix";
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::invalid_argument);
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::shm::test
