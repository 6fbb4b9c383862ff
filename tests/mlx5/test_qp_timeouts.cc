// The QP attributes that decide how long the HCA waits for a dead or stalled
// peer (docs/hier-transports.md, "Timeouts"): ACK timeout 18 (1.07 s per
// try), a finite RNR retry and an RNR NAK timer of 0.64 ms (min_rnr_timer
// 12), so a peer that stops consuming arrivals fails the QP in milliseconds
// instead of the HCA retrying forever, and a receive that is only late
// stalls the writer about a millisecond, not half a second (31 did). Two QPs of one forked process
// connected to each other over fakeverbs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>

#include "core/mlx5/resources.h"
#include "core/shm/status.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

int stalled_receiver() {
  const Verbs* v = load_verbs();
  FT_CHECK(v != nullptr);
  std::shared_ptr<Device> dev;
  std::string why;
  FT_CHECK_STATUS(Device::open(*v, NetOptions{}, 64, &dev, &why), Status::ok);
  std::unique_ptr<QueuePair> writer, reader;
  FT_CHECK_STATUS(QueuePair::create(dev, {8, 8, 0, 1}, &writer), Status::ok);
  FT_CHECK_STATUS(QueuePair::create(dev, {8, 8, 0, 1}, &reader), Status::ok);
  const NetOptions opt;  // the defaults are the point
  FT_CHECK_STATUS(writer->connect(dev->address(), reader->qpn(), 7, 9, opt), Status::ok);
  FT_CHECK_STATUS(reader->connect(dev->address(), writer->qpn(), 9, 7, opt), Status::ok);
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  FT_CHECK(v->query_qp(writer->get(), &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY,
                       &init) == 0);
  FT_CHECK(a.timeout == 18 && a.retry_cnt == 7 && a.rnr_retry < 7);
  // The responder's RNR NAK timer is what the requester waits per RNR.
  FT_CHECK(v->query_qp(reader->get(), &a, IBV_QP_MIN_RNR_TIMER, &init) == 0);
  if (a.min_rnr_timer != 12) std::fprintf(stderr, "min_rnr_timer %d\n", a.min_rnr_timer);
  FT_CHECK(a.min_rnr_timer == 12);

  // The reader never posts a receive (a peer that stopped polling): the
  // write with immediate meets RNR until the writer's budget runs out.
  std::uint64_t word = 0;
  std::unique_ptr<MemoryRegion> mr;
  FT_CHECK_STATUS(MemoryRegion::create(dev, &word, sizeof word,
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr),
                  Status::ok);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(&word), sizeof word, mr->lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(&word);
  wr.wr.rdma.rkey = mr->rkey();
  ibv_send_wr* bad = nullptr;
  FT_CHECK(Verbs::post_send(writer->get(), &wr, &bad) == 0);
  const auto start = std::chrono::steady_clock::now();
  ibv_wc wc{};
  int n = 0;
  while (n == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(8)) {
    n = Verbs::poll_cq(dev->cq(), 1, &wc);
  }
  if (n != 1) std::fprintf(stderr, "no completion within 8 s: the HCA retries RNR forever\n");
  FT_CHECK(n == 1);
  FT_CHECK(wc.status == IBV_WC_RNR_RETRY_EXC_ERR);
  // 0.64 ms x (rnr_retry 6 + 1) = 4.5 ms of RNR budget (31: 3.4 s).
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (took >= 1.0) std::fprintf(stderr, "the RNR budget ran out after %.2f s\n", took);
  FT_CHECK(took < 1.0);
  return 0;
}

TEST(QpTimeouts, AStalledReceiverFailsTheWriteInSecondsNotNever) {
  const auto res = shm::test::run_forked(1, [](shm::test::ForkBootstrap&) {
    return stalled_receiver();
  }, 20);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::mlx5
