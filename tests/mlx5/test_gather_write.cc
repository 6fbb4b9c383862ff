// The zero-copy gather end to end over fakeverbs: a "leader" process posts
// RDMA writes whose SGE lists (core/mlx5/gather.h) read three "ranks'" send
// buffers - separate allocations at odd offsets, registered through RegCache
// over the VerbsRegistrar (addresses from Ref::key_for) - into a peer
// process's out-area framed by guard bytes. The QP is granted 3 SGEs, so the
// message needs several WRs. The Refs are dropped only after the write
// completions are polled (the protocol ranks follow, docs/zerocopy.md).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/mlx5/gather.h"
#include "core/mlx5/resources.h"
#include "core/mlx5/verbs_registrar.h"
#include "core/shm/status.h"
#include "rcache/regcache.h"
#include "tests/mlx5/fork_group.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

constexpr std::size_t kBpp = 100;       // bytes per peer
constexpr std::size_t kTeam = 6;        // node_of = {0, 1, 0, 0, 1, 1}
constexpr std::size_t kGuard = 64;
const int kDest[] = {1, 4, 5};  // node 1, local order (node 0 = ranks 0, 2, 3: sources 0..2)
constexpr std::size_t kMessage = 3 * 3 * kBpp;

struct Info {
  PortAddress addr;
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint64_t out = 0;
  std::uint32_t rkey = 0;
};

unsigned char pattern(std::size_t source, std::size_t i) {
  return static_cast<unsigned char>(source * 37 + i * 11 + 5);
}

int leader(const Verbs& v, const std::shared_ptr<Device>& dev, QueuePair& qp, const Info& peer) {
  VerbsRegistrar reg(v, dev->pd());
  std::string why;
  auto cache = rcache::RegCache::create(reg, rcache::Options{}, &why);
  FT_CHECK(cache != nullptr);
  std::vector<std::vector<unsigned char>> mem(3);
  std::vector<rcache::Ref> refs;
  std::vector<SendBuffer> src;
  for (std::size_t a = 0; a < 3; ++a) {
    const std::size_t off = a == 0 ? 1 : a == 1 ? 3 : 17;  // odd offsets
    mem[a].assign(kTeam * kBpp + off, 0);
    unsigned char* p = mem[a].data() + off;
    for (std::size_t i = 0; i < kTeam * kBpp; ++i) p[i] = pattern(a, i);
    refs.push_back(cache->get(p, kTeam * kBpp, rcache::kLocalWrite | rcache::kRemoteRead));
    FT_CHECK(refs.back());
    const rcache::KeyInfo k = refs.back().key_for(p);
    FT_CHECK(k.valid && k.addr == reinterpret_cast<std::uintptr_t>(p));
    src.push_back({k.addr, k.lkey});
  }
  std::vector<ibv_sge> sges;
  gather_message(src, kDest, kBpp, 0, kBpp, &sges);
  // Rows rotated by source (100-byte chunks, core/hier/rows.h): {1}{4, 5},
  // {5}{1}{4}, {4, 5}{1}.
  FT_CHECK(sges.size() == 7);
  FT_CHECK(qp.send_sge() == 3);
  std::vector<WrSpan> wrs;
  split_wrs(sges, qp.send_sge(), kMaxSgeBytes, &wrs);
  FT_CHECK(wrs.size() == 3);
  std::vector<ibv_send_wr> wr(wrs.size());
  for (std::size_t w = 0; w < wrs.size(); ++w) {
    wr[w] = {};
    wr[w].wr_id = w;
    wr[w].sg_list = &sges[wrs[w].first_sge];
    wr[w].num_sge = static_cast<int>(wrs[w].num_sge);
    wr[w].opcode = IBV_WR_RDMA_WRITE;
    wr[w].send_flags = IBV_SEND_SIGNALED;
    wr[w].wr.rdma.remote_addr = peer.out + kGuard + wrs[w].offset;
    wr[w].wr.rdma.rkey = peer.rkey;
    wr[w].next = w + 1 < wrs.size() ? &wr[w + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  FT_CHECK(Verbs::post_send(qp.get(), wr.data(), &bad) == 0);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::size_t done = 0;
  while (done < wrs.size() && std::chrono::steady_clock::now() < end) {
    ibv_wc wc{};
    const int n = Verbs::poll_cq(dev->cq(), 1, &wc);
    FT_CHECK(n >= 0);
    if (n == 1) {
      FT_CHECK(wc.status == IBV_WC_SUCCESS);
      ++done;
    }
  }
  FT_CHECK(done == wrs.size());
  refs.clear();  // only now may the buffers be released
  return 0;
}

TEST(GatherWrite, ZeroCopyMessageLandsExactlyAsTheInAreaSection) {
  test::ForkGroupWiring wiring(2);
  const auto res = shm::test::run_forked(2, [&](shm::test::ForkBootstrap& boot) {
    const int me = boot.local_rank();
    test::ForkGroup group(wiring, me);
    const Verbs* v = load_verbs();
    FT_CHECK(v != nullptr);
    std::shared_ptr<Device> dev;
    std::string why;
    FT_CHECK_STATUS(Device::open(*v, NetOptions{}, 64, &dev, &why), Status::ok);
    std::unique_ptr<QueuePair> qp;
    FT_CHECK_STATUS(QueuePair::create(dev, {16, 16, 0, 3}, &qp), Status::ok);
    std::vector<unsigned char> out(kMessage + 2 * kGuard, 0xEE);
    std::unique_ptr<MemoryRegion> mr;
    FT_CHECK_STATUS(MemoryRegion::create(dev, out.data(), out.size(),
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr),
                    Status::ok);
    Info mine;
    mine.addr = dev->address();
    mine.qpn = qp->qpn();
    mine.psn = 100 + static_cast<std::uint32_t>(me);
    mine.out = reinterpret_cast<std::uintptr_t>(out.data());
    mine.rkey = mr->rkey();
    Info all[2];
    FT_CHECK(group.allgather(&mine, all, sizeof mine));
    const Info& peer = all[1 - me];
    NetOptions opt;
    FT_CHECK_STATUS(qp->connect(peer.addr, peer.qpn, peer.psn, mine.psn, opt), Status::ok);
    FT_CHECK(group.allgather(&mine, all, sizeof mine));  // both connected
    if (me == 0 && leader(*v, dev, *qp, peer) != 0) return 1;
    FT_CHECK(group.allgather(&mine, all, sizeof mine));  // the writes completed
    if (me == 1) {
      // Section layout: block [a][b] at (a * 3 + (a + b) % 3) * kBpp (rows
      // rotated by source), from source a's bytes for team rank kDest[b].
      for (std::size_t i = 0; i < kGuard; ++i) {
        FT_CHECK(out[i] == 0xEE);
        FT_CHECK(out[kGuard + kMessage + i] == 0xEE);
      }
      for (std::size_t a = 0; a < 3; ++a) {
        for (std::size_t b = 0; b < 3; ++b) {
          for (std::size_t i = 0; i < kBpp; ++i) {
            const std::size_t at = kGuard + (a * 3 + (a + b) % 3) * kBpp + i;
            FT_CHECK(out[at] == pattern(a, static_cast<std::size_t>(kDest[b]) * kBpp + i));
          }
        }
      }
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::mlx5
