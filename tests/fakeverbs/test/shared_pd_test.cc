// Registration by an importer of a shared PD (man ibv_import_pd,
// ibv_reg_mr): the way UCC tl/mlx5 does node-level zero-copy.  Process A owns
// the device, the PD and a QP connected to C; B imports the PD and registers
// its own buffer on it; A's QP gathers from B's MR by lkey and C writes into
// it by rkey.  Old behaviour for every test here: ibv_reg_mr on an imported
// PD failed with EOPNOTSUPP, so B's registration assertion fails.
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "harness.h"

using namespace fvtest;

namespace {

constexpr int kA = 0, kB = 1, kC = 2;

// What B publishes about its MR: exactly what a zero-copy engine exchanges.
struct Region {
  uint64_t addr;
  uint32_t len;
  uint32_t lkey;
  uint32_t rkey;
  pid_t pid;
};

uint8_t pat_b(size_t i) { return uint8_t(0x10 + i * 7); }
uint8_t pat_a(size_t i) { return uint8_t(0xa0 + i); }
uint8_t pat_c(size_t i) { return uint8_t(0x50 + i * 3); }

uint64_t stale_reads() {
  using Fn = uint64_t (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "fakeverbs_stale_reads"));
  if (!fn) ADD_FAILURE() << "fakeverbs_stale_reads not exported";
  return fn ? fn() : 0;
}

// B's side of the import: the device from A's cmd_fd, then A's PD.
struct Importer {
  explicit Importer(Channel& a) {
    int fd = a.recv_fd();
    const uint32_t handle = a.get<uint32_t>();
    if (fd >= 0) ctx = ibv_import_device(fd);
    if (fd >= 0) close(fd);
    if (ctx) pd = ibv_import_pd(ctx, handle);
    if (!pd) {
      ADD_FAILURE() << "import of A's device/PD failed";
      exit(2);
    }
  }
  ~Importer() {
    ibv_unimport_pd(pd);
    EXPECT_EQ(ibv_close_device(ctx), 0);
  }
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
};

void share_pd(Endpoint& e, Channel& b) {
  b.send_fd(e.ctx->cmd_fd);
  b.put(e.pd->handle);
}

// B's buffer: two pages of guard bytes (0xee); the MR covers `len` bytes at
// an odd offset straddling the page boundary.
constexpr size_t kMapLen = 8192, kOff = 4096 - 151, kLen = 300;

uint8_t* map_guarded() {
  void* p = mmap(nullptr, kMapLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  memset(p, 0xee, kMapLen);
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < kLen; ++i) b[kOff + i] = pat_b(i);
  return b;
}

Region region_of(ibv_mr* mr) {
  return {uintptr_t(mr->addr), uint32_t(mr->length), mr->lkey, mr->rkey, getpid()};
}

// A: one WRITE to C whose gather list is B's whole MR then 100 bytes of A's.
int post_gather(Endpoint& e, const Region& b, const Address& c, uint64_t wr_id) {
  ibv_sge sg[2] = {{b.addr, b.len, b.lkey}, {uintptr_t(e.buf), 100, e.mr->lkey}};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = sg;
  wr.num_sge = 2;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c.addr + 17;
  wr.wr.rdma.rkey = c.rkey;
  return ibv_post_send(e.qp, &wr, &bad);
}

ibv_wc_status one_completion(Endpoint& e) {
  auto wc = e.poll(1);
  if (wc.size() != 1) {
    ADD_FAILURE() << "no completion";
    return IBV_WC_GENERAL_ERR;
  }
  return wc[0].status;
}

}  // namespace

// The whole zero-copy path: C writes into B's memory with B's rkey through
// A's QP; A gathers B's bytes (by B's lkey) and its own into one WRITE to C,
// which sees exactly those bytes; B's ibv_dereg_mr is refused while A's WR is
// not polled (the guard sees WRs of other processes), then succeeds, after
// which A's post with B's lkey completes with IBV_WC_LOC_PROT_ERR.
TEST(SharedPd, OwnerQpGathersFromImporterMr) {
  auto a = [](Mesh& m) {
    Endpoint e;
    Channel &b = m.to(kB), &c = m.to(kC);
    const Address ca = e.connect_over(c);
    share_pd(e, b);
    const Region br = b.get<Region>();
    c.put(br);
    ASSERT_EQ(c.get<int>(), 1);  // C wrote into B's memory
    for (size_t i = 0; i < 100; ++i) e.buf[i] = pat_a(i);
    ASSERT_EQ(post_gather(e, br, ca, 1), 0);
    b.put(1);                    // posted, not yet polled
    EXPECT_EQ(b.get<int>(), EBUSY) << "B's dereg not refused while A's WR uses its MR";
    EXPECT_EQ(one_completion(e), IBV_WC_SUCCESS);
    c.put(1);
    ASSERT_EQ(c.get<int>(), 1);  // C checked the bytes
    b.put(2);                    // polled: B may deregister
    EXPECT_EQ(b.get<int>(), 0);
    ASSERT_EQ(post_gather(e, br, ca, 2), 0);
    EXPECT_EQ(one_completion(e), IBV_WC_LOC_PROT_ERR) << "deregistered lkey accepted";
    EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
    b.sync();
    c.sync();
  };
  auto b = [](Mesh& m) {
    Channel& a = m.to(kA);
    Importer imp(a);
    uint8_t* base = map_guarded();
    ASSERT_NE(base, nullptr);
    ibv_mr* mr = ibv_reg_mr(imp.pd, base + kOff, kLen,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr) << "ibv_reg_mr on the imported PD: " << strerror(errno);
    a.put(region_of(mr));
    ASSERT_EQ(m.to(kC).get<int>(), 1);  // C's write landed
    for (size_t i = 0; i < kLen; ++i) {
      const uint8_t want = i >= 200 && i < 264 ? pat_c(i - 200) : pat_b(i);
      ASSERT_EQ(base[kOff + i], want) << "byte " << i << " of B's MR";
    }
    for (size_t i = 0; i < kMapLen; ++i) {
      if (i < kOff || i >= kOff + kLen) {
        ASSERT_EQ(base[i], 0xee) << "guard byte " << i;
      }
    }
    ASSERT_EQ(a.get<int>(), 1);
    a.put(ibv_dereg_mr(mr));  // A's WR still counts: EBUSY
    ASSERT_EQ(a.get<int>(), 2);
    a.put(ibv_dereg_mr(mr));
    a.sync();
    munmap(base, kMapLen);
  };
  auto c = [](Mesh& m) {
    Endpoint e;
    Channel& a = m.to(kA);
    const Address aa = e.connect_over(a);
    const Region br = a.get<Region>();
    for (size_t i = 0; i < 64; ++i) e.buf[1000 + i] = pat_c(i);
    Address into_b = aa;  // A's QP, B's memory and rkey
    into_b.addr = br.addr;
    into_b.rkey = br.rkey;
    ASSERT_EQ(e.post_write(1, into_b, 1000, 64, true, 200), 0);
    EXPECT_EQ(one_completion(e), IBV_WC_SUCCESS) << "C's write with B's rkey";
    m.to(kB).put(1);
    a.put(1);
    ASSERT_EQ(a.get<int>(), 1);  // A's gather completed
    for (size_t i = 0; i < 4096; ++i) {
      uint8_t want = 0;
      if (i >= 17 && i < 17 + kLen) want = i - 17 >= 200 && i - 17 < 264 ? pat_c(i - 17 - 200)
                                                                          : pat_b(i - 17);
      else if (i >= 17 + kLen && i < 17 + kLen + 100) want = pat_a(i - 17 - kLen);
      else if (i >= 1000 && i < 1064) want = pat_c(i - 1000);
      ASSERT_EQ(e.buf[i], want) << "byte " << i << " at C";
    }
    a.put(1);
    a.sync();
  };
  run_group({a, b, c}, {{}, {}, {"FAKEVERBS_QUIET=1"}});
}

// B frees its buffer and maps new memory at the same address before A
// posts: the HCA reads the pages pinned at registration, so C gets the old
// pages (0xdb in the fake), not B's new data, and B's stale-read counter
// shows it.  Without frame numbers (not root) B leaves the new pages
// untouched (absent), which the fake sees without them.
TEST(SharedPd, StaleImporterPagesAreCountedInTheImporter) {
  const bool frames = page_frames_readable();
  auto a = [](Mesh& m) {
    Endpoint e;
    Channel &b = m.to(kB), &c = m.to(kC);
    const Address ca = e.connect_over(c);
    share_pd(e, b);
    const Region br = b.get<Region>();
    for (size_t i = 0; i < 100; ++i) e.buf[i] = pat_a(i);
    ASSERT_EQ(post_gather(e, br, ca, 1), 0);
    EXPECT_EQ(one_completion(e), IBV_WC_SUCCESS) << "a stale page is no error on hardware";
    c.put(1);
    ASSERT_EQ(c.get<int>(), 1);
    b.put(1);
    b.sync();
  };
  auto b = [frames](Mesh& m) {
    Channel& a = m.to(kA);
    Importer imp(a);
    uint8_t* base = map_guarded();
    ASSERT_NE(base, nullptr);
    ibv_mr* mr = ibv_reg_mr(imp.pd, base + kOff, kLen, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr) << "ibv_reg_mr on the imported PD: " << strerror(errno);
    ASSERT_EQ(munmap(base, kMapLen), 0);
    ASSERT_EQ(mmap(base, kMapLen, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), base);
    if (frames) memset(base, 0x11, kMapLen);
    const uint64_t before = stale_reads();
    a.put(region_of(mr));
    ASSERT_EQ(a.get<int>(), 1);  // A's WR completed
    EXPECT_EQ(stale_reads() - before, 1u) << "stale read of B's memory not counted in B";
    for (size_t i = 0; frames && i < kMapLen; ++i) ASSERT_EQ(base[i], 0x11) << i;
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    a.sync();
    munmap(base, kMapLen);
  };
  auto c = [](Mesh& m) {
    Endpoint e;
    Channel& a = m.to(kA);
    e.connect_over(a);
    ASSERT_EQ(a.get<int>(), 1);
    for (size_t i = 0; i < kLen; ++i)
      ASSERT_EQ(e.buf[17 + i], 0xdb) << "byte " << i << ": not the pinned (old) page's";
    for (size_t i = 0; i < 100; ++i) ASSERT_EQ(e.buf[17 + kLen + i], pat_a(i)) << i;
    a.put(1);
  };
  run_group({a, b, c}, {{"FAKEVERBS_QUIET=1"}, {"FAKEVERBS_QUIET=1"}, {}});
}

// The importer's registrations count against the importer's RLIMIT_MEMLOCK
// (ib_umem_get charges the registering process), not the PD owner's.
TEST(SharedPd, ImporterMemlockLimitIsItsOwn) {
  auto a = [](Channel& b) {
    Endpoint e;
    share_pd(e, b);
    b.sync();
  };
  auto b = [](Channel& a) {
    Importer imp(a);
    rlimit lim{64 * 1024, 64 * 1024};
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &lim), 0);
    std::vector<uint8_t> x(40 * 1024), y(40 * 1024);
    ibv_mr* mx = ibv_reg_mr(imp.pd, x.data(), x.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mx, nullptr) << strerror(errno);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(imp.pd, y.data(), y.size(), IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    ASSERT_EQ(ibv_dereg_mr(mx), 0);
    ibv_mr* my = ibv_reg_mr(imp.pd, y.data(), y.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(my, nullptr);
    ASSERT_EQ(ibv_dereg_mr(my), 0);
    a.sync();
  };
  run_pair(a, b, {}, {"FAKEVERBS_QUIET=1"});
}

// B registers, publishes and exits without deregistering.  The fake cannot
// read a dead process's memory (hardware would keep its pinned pages while
// the shared context lives): its keys resolve to nothing -- a local SGE with
// its lkey is IBV_WC_LOC_PROT_ERR, a write with its rkey
// IBV_WC_REM_ACCESS_ERR -- and A's PD deallocates cleanly afterwards.
TEST(SharedPd, DeadImporterMrResolvesToNothing) {
  auto a = [](Channel& b) {
    Endpoint e;
    e.connect_self();
    share_pd(e, b);
    const Region br = b.get<Region>();
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (kill(br.pid, 0) == 0 && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_NE(kill(br.pid, 0), 0) << "B did not exit";
    Address into_b = e.address();
    into_b.addr = br.addr;
    into_b.rkey = br.rkey;
    ASSERT_EQ(e.post_write(1, into_b, 0, 64, true), 0);
    EXPECT_EQ(one_completion(e), IBV_WC_REM_ACCESS_ERR) << "dead importer's rkey accepted";
    EndpointOptions o;
    o.shared_pd = e.pd;
    Endpoint e2(o);
    e2.connect_self();
    ibv_sge sg{br.addr, br.len, br.lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = uintptr_t(e.buf);
    wr.wr.rdma.rkey = e.mr->rkey;
    ASSERT_EQ(ibv_post_send(e2.qp, &wr, &bad), 0);
    EXPECT_EQ(one_completion(e2), IBV_WC_LOC_PROT_ERR) << "dead importer's lkey accepted";
  };
  auto b = [](Channel& a) {
    Importer imp(a);
    static uint8_t buf[256];
    ibv_mr* mr = ibv_reg_mr(imp.pd, buf, sizeof buf,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr) << strerror(errno);
    a.put(region_of(mr));
    _exit(0);  // dies holding the MR (and its imports)
  };
  run_pair(a, b, {"FAKEVERBS_QUIET=1"}, {"FAKEVERBS_QUIET=1"});
}

// Destruction in any order: B unimports the PD while its MR and a QP made on
// it still exist (man ibv_import_pd: unimport releases only the handle), then
// destroys them; A deallocates its PD after B's MR is gone.  Old behaviour:
// the registration was refused (and unimport freed the PD under its
// children, so a later ibv_dereg_mr used freed memory).
TEST(SharedPd, UnimportBeforeItsMrAndQpIsSafe) {
  auto a = [](Channel& b) {
    Endpoint e;
    share_pd(e, b);
    b.sync();  // B is done
  };
  auto b = [](Channel& a) {
    int fd = a.recv_fd();
    const uint32_t handle = a.get<uint32_t>();
    ASSERT_GE(fd, 0);
    ibv_context* ctx = ibv_import_device(fd);
    close(fd);
    ASSERT_NE(ctx, nullptr);
    ibv_pd* pd = ibv_import_pd(ctx, handle);
    ASSERT_NE(pd, nullptr);
    std::vector<uint8_t> mem(4096, 1);
    ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr) << strerror(errno);
    ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd, &ia);
    ASSERT_NE(qp, nullptr);
    ibv_unimport_pd(pd);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    EXPECT_EQ(ibv_close_device(ctx), 0);
    a.sync();
  };
  run_pair(a, b, {}, {"FAKEVERBS_QUIET=1"});
}
