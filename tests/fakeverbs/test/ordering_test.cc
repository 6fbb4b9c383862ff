// Ordering between the writes of one QP (issue 13): plain RDMA WRITEs into an
// ordinary MR land in posting order; into a relaxed-ordering MR
// (IBV_ACCESS_RELAXED_ORDERING) a later write's data may be seen first; a
// receive completion (WRITE_WITH_IMM) still comes after every earlier write's
// data.  Each test names the old behaviour it fails on.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "harness.h"

using namespace fvtest;

namespace {

constexpr size_t kData = 4096;   // the payload, at offset 0 of both buffers
constexpr size_t kFlag = kData;  // an 8-byte flag right after it
constexpr int kRounds = 40;

enum class Signal { flag_write, write_with_imm };

// The writer posts the payload (plain WRITE) and then the signal (a plain
// WRITE of the flag, or a WRITE_WITH_IMM of it) back to back; the reader waits
// for the signal -- the flag's value, or the receive completion -- and counts
// the rounds in which some of the payload was not there yet.  Returns that
// count (from the reader's process, through its exit status).
void run_ordering(bool relaxed, Signal signal, int* torn_out) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  auto writer = [signal](Channel& ch) {
    EndpointOptions o;
    o.buf_size = kData + 64;
    Endpoint e(o);
    Address peer = e.connect_over(ch);
    for (int r = 1; r <= kRounds; ++r) {
      memset(e.buf, r, kData);
      uint64_t flag = uint64_t(r);
      memcpy(e.buf + kFlag, &flag, sizeof flag);
      ASSERT_EQ(e.post_write(2 * r, peer, 0, kData, false), 0);
      const ibv_wr_opcode op =
          signal == Signal::flag_write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
      ASSERT_EQ(e.post_write(2 * r + 1, peer, kFlag, sizeof flag, true, kFlag, op, uint32_t(r)),
                0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      ch.sync();  // the reader has checked this round
    }
  };
  auto reader = [relaxed, signal, wfd = pipefd[1]](Channel& ch) {
    EndpointOptions o;
    o.buf_size = kData + 64;
    o.max_inline = 0;
    if (relaxed) o.mr_access |= IBV_ACCESS_RELAXED_ORDERING;
    Endpoint e(o);
    e.connect_over(ch, [&] {
      if (signal == Signal::write_with_imm) {
        for (int r = 0; r < kRounds; ++r) ASSERT_EQ(e.post_recv(r, kData + 8, 8), 0);
      }
    });
    int torn = 0;
    for (int r = 1; r <= kRounds; ++r) {
      if (signal == Signal::flag_write) {
        volatile uint64_t* flag = reinterpret_cast<volatile uint64_t*>(e.buf + kFlag);
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (*flag != uint64_t(r)) {
          ASSERT_LT(std::chrono::steady_clock::now(), end) << "flag of round " << r;
          std::this_thread::yield();
        }
      } else {
        auto wc = e.poll(1);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
        ASSERT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      }
      bool behind = false;
      for (size_t i = 0; i < kData; ++i) behind |= e.buf[i] != uint8_t(r);
      torn += behind;
      ch.sync();
    }
    ASSERT_EQ(write(wfd, &torn, sizeof torn), ssize_t(sizeof torn));
  };
  // The writer's process is the HCA that executes the writes.
  run_pair(writer, reader, {"FAKEVERBS_JITTER_US=2000"}, {});
  close(pipefd[1]);
  int torn = -1;
  EXPECT_EQ(read(pipefd[0], &torn, sizeof torn), ssize_t(sizeof torn));
  close(pipefd[0]);
  *torn_out = torn;
}

}  // namespace

// Plain writes of one QP into an ordinary MR: the flag never overtakes the
// payload (RC ordering; IB spec 9.5: writes are placed in order). A fake that
// reordered everything would fail here.
TEST(Ordering, OrdinaryMrKeepsPostingOrder) {
  int torn = -1;
  run_ordering(false, Signal::flag_write, &torn);
  EXPECT_EQ(torn, 0) << "a later write's data was seen before an earlier one's";
}

// Old behaviour: IBV_ACCESS_RELAXED_ORDERING was accepted and ignored, so a
// flag written after the payload proved the payload there. Now the payload
// may land after the flag (man ibv_reg_mr: the system may reorder accesses).
TEST(Ordering, RelaxedMrLetsALaterWritePass) {
  int torn = -1;
  run_ordering(true, Signal::flag_write, &torn);
  EXPECT_GT(torn, 0) << "the flag never overtook the payload in " << kRounds << " rounds";
}

// Even into a relaxed-ordering MR, a receive completion means every earlier
// write's data is there (the completion is not reordered with the data).
// Fails on a fake that held relaxed writes past the receive completion.
TEST(Ordering, ReceiveCompletionCoversRelaxedWrites) {
  int torn = -1;
  run_ordering(true, Signal::write_with_imm, &torn);
  EXPECT_EQ(torn, 0) << "a receive completion came before an earlier relaxed write's data";
}
