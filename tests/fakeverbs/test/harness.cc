#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace fvtest {

void Channel::send(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = write(fd_, c, n);
    if (k <= 0) {
      ADD_FAILURE() << "channel write failed";
      exit(3);
    }
    c += k;
    n -= size_t(k);
  }
}

void Channel::recv(void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, 10000) != 1) {
      ADD_FAILURE() << "channel: peer silent for 10 s";
      exit(3);
    }
    ssize_t k = read(fd_, c, n);
    if (k <= 0) {
      ADD_FAILURE() << "channel: peer gone";
      exit(3);
    }
    c += k;
    n -= size_t(k);
  }
}

void Channel::send_fd(int fd) {
  char byte = 0;
  iovec v{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(fd_, &m, 0) != 1) ADD_FAILURE() << "sendmsg(SCM_RIGHTS) failed";
}

int Channel::recv_fd() {
  pollfd pf{fd_, POLLIN, 0};
  if (poll(&pf, 1, 10000) != 1) {
    ADD_FAILURE() << "channel: no descriptor within 10 s";
    return -1;
  }
  char byte;
  iovec v{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  if (recvmsg(fd_, &m, 0) != 1) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

namespace {

pid_t spawn(const Role& r, int fd, int other_fd, const std::vector<std::string>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    close(other_fd);  // so that the peer's exit shows as EOF here
    for (const std::string& e : env) putenv(strdup(e.c_str()));
    Channel ch(fd);
    r(ch);
    exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  return pid;
}

// Waits for all pids until the deadline; kills stragglers.
void reap(std::vector<pid_t> pids, int timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  while (left) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int st = 0;
      pid_t r = waitpid(pids[i], &st, WNOHANG);
      if (r == pids[i]) {
        done[i] = true;
        --left;
        if (WIFSIGNALED(st)) ADD_FAILURE() << "process " << char('A' + i) << " died of signal " << WTERMSIG(st);
        else EXPECT_EQ(WEXITSTATUS(st), 0) << "process " << char('A' + i) << " failed";
      }
    }
    if (!left) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          ADD_FAILURE() << "process " << char('A' + i) << " timed out after " << timeout_s << " s";
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string fresh_dir() {
  char tmpl[] = "/dev/shm/fakeverbs-test-XXXXXX";
  if (!mkdtemp(tmpl)) return "/dev/shm/fakeverbs-test-fallback";
  rmdir(tmpl);  // the fake creates it, and must remove it when done
  return tmpl;
}

// Every test runs with a known seed (hca.h): FAKEVERBS_SEED from the
// environment to replay, else a fresh one, named when the test fails.
void seed_children() {
  static std::string seed;
  if (const char* v = getenv("FAKEVERBS_SEED"); v && *v) {
    seed = v;
  } else {
    seed = std::to_string((uint64_t(getpid()) << 32) ^ uint64_t(
        std::chrono::steady_clock::now().time_since_epoch().count()));
    setenv("FAKEVERBS_SEED", seed.c_str(), 1);
  }
}

void report_seed(bool given_before) {
  if (::testing::Test::HasFailure())
    ADD_FAILURE() << "replay with FAKEVERBS_SEED=" << getenv("FAKEVERBS_SEED");
  if (!given_before) unsetenv("FAKEVERBS_SEED");
}

void check_cleaned(const std::string& dir) {
  struct stat st {};
  EXPECT_NE(stat(dir.c_str(), &st), 0) << "rendezvous directory " << dir << " left behind";
  std::string cmd = "rm -rf '" + dir + "'";
  if (system(cmd.c_str()) != 0) {
  }
}

}  // namespace

void run_pair(const Role& a, const Role& b, const std::vector<std::string>& a_env,
              const std::vector<std::string>& b_env, int timeout_s) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string dir = fresh_dir();
  setenv("FAKEVERBS_DIR", dir.c_str(), 1);
  const bool given = getenv("FAKEVERBS_SEED") != nullptr;
  seed_children();
  pid_t pa = spawn(a, sv[0], sv[1], a_env);
  pid_t pb = spawn(b, sv[1], sv[0], b_env);
  close(sv[0]);
  close(sv[1]);
  reap({pa, pb}, timeout_s);
  report_seed(given);
  check_cleaned(dir);
}

Mesh::Mesh(int s, const std::vector<int>& fds) : self(s) {
  for (int fd : fds) ch_.emplace_back(fd);
}

void run_group(const std::vector<GroupRole>& roles,
               const std::vector<std::vector<std::string>>& env, int timeout_s) {
  const size_t n = roles.size();
  // fds[i][j]: process i's end of the socket joining i and j.
  std::vector<std::vector<int>> fds(n, std::vector<int>(n, -1));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      int sv[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
      fds[i][j] = sv[0];
      fds[j][i] = sv[1];
    }
  std::string dir = fresh_dir();
  setenv("FAKEVERBS_DIR", dir.c_str(), 1);
  const bool given = getenv("FAKEVERBS_SEED") != nullptr;
  seed_children();
  std::vector<pid_t> pids;
  for (size_t i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      for (size_t k = 0; k < n; ++k)  // only our own ends stay open
        for (size_t j = 0; j < n; ++j)
          if (k != i && fds[k][j] >= 0) close(fds[k][j]);
      if (i < env.size())
        for (const std::string& e : env[i]) putenv(strdup(e.c_str()));
      Mesh m(int(i), fds[i]);
      roles[i](m);
      exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    pids.push_back(pid);
  }
  for (auto& row : fds)
    for (int fd : row)
      if (fd >= 0) close(fd);
  reap(pids, timeout_s);
  report_seed(given);
  check_cleaned(dir);
}

void run_one(const Role& a, const std::vector<std::string>& env, int timeout_s) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string dir = fresh_dir();
  setenv("FAKEVERBS_DIR", dir.c_str(), 1);
  const bool given = getenv("FAKEVERBS_SEED") != nullptr;
  seed_children();
  pid_t pa = spawn(a, sv[0], sv[1], env);
  close(sv[0]);
  close(sv[1]);
  reap({pa}, timeout_s);
  report_seed(given);
  check_cleaned(dir);
}

Endpoint::Endpoint(const EndpointOptions& o) : opt(o) {
  if (o.shared_pd) {
    // On a PD (and its context) the caller owns, e.g. imported: no buffer
    // of our own either (the caller registers what it needs).
    ctx = o.shared_pd->context;
    pd = o.shared_pd;
    borrowed_ = true;
    ibv_port_attr pa{};
    ibv_query_port(ctx, 1, &pa);
    roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    cq = ibv_create_cq(ctx, o.cqe, nullptr, nullptr, 0);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = o.max_send_wr;
    ia.cap.max_recv_wr = o.max_recv_wr;
    ia.cap.max_send_sge = o.max_send_sge;
    ia.cap.max_recv_sge = o.max_recv_sge;
    if (cq) qp = ibv_create_qp(pd, &ia);
    if (!cq || !qp) {
      ADD_FAILURE() << "endpoint setup on a shared PD failed: " << strerror(errno);
      exit(2);
    }
    return;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n <= o.device) {
    ADD_FAILURE() << "no fake device " << o.device;
    exit(2);  // nothing below could work; fail this process now
  }
  ctx = ibv_open_device(list[o.device]);
  ibv_free_device_list(list);
  if (!ctx) {
    ADD_FAILURE() << "ibv_open_device failed";
    exit(2);
  }
  ibv_port_attr pa{};
  ibv_query_port(ctx, 1, &pa);
  roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  pd = ibv_alloc_pd(ctx);
  if (o.comp_channel) {
    channel = ibv_create_comp_channel(ctx);
    if (!channel) ADD_FAILURE() << "ibv_create_comp_channel failed";
  }
  cq = ibv_create_cq(ctx, o.cqe, nullptr, channel, 0);
  buf = static_cast<uint8_t*>(aligned_alloc(4096, (o.buf_size + 4095) / 4096 * 4096));
  memset(buf, 0, o.buf_size);
  mr = ibv_reg_mr(pd, buf, o.buf_size, o.mr_access);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = o.max_send_wr;
  ia.cap.max_recv_wr = o.max_recv_wr;
  ia.cap.max_send_sge = o.max_send_sge;
  ia.cap.max_recv_sge = o.max_recv_sge;
  ia.cap.max_inline_data = o.max_inline;
  if (pd && cq) qp = ibv_create_qp(pd, &ia);
  if (!pd || !cq || !mr || !qp) {
    ADD_FAILURE() << "endpoint setup failed: " << strerror(errno);
    exit(2);
  }
}

Endpoint::~Endpoint() {
  if (qp) {
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
  }
  if (mr) {
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
  }
  if (cq) {
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
  }
  if (channel) {
    EXPECT_EQ(ibv_destroy_comp_channel(channel), 0);
  }
  if (pd && !borrowed_) {
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  }
  if (ctx && !borrowed_) {
    EXPECT_EQ(ibv_close_device(ctx), 0);
  }
  free(buf);
}

Address Endpoint::address() const {
  Address a{};
  ibv_port_attr pa{};
  ibv_query_port(ctx, 1, &pa);
  a.lid = pa.lid;
  ibv_query_gid(ctx, 1, 0, &a.gid);
  a.qpn = qp->qp_num;
  a.addr = uintptr_t(buf);
  a.rkey = mr ? mr->rkey : 0;
  return a;
}

int Endpoint::to_init() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = unsigned(opt.qp_access);
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int Endpoint::to_rtr(const Address& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = roce ? IBV_MTU_1024 : IBV_MTU_4096;
  a.dest_qp_num = peer.qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = opt.rd_atomic;
  a.min_rnr_timer = opt.min_rnr_timer;
  a.ah_attr.port_num = 1;
  a.ah_attr.dlid = peer.lid;
  if (roce) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid;
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 1;
  }
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int Endpoint::to_rts() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = opt.timeout;
  a.retry_cnt = opt.retry_cnt;
  a.rnr_retry = opt.rnr_retry;
  a.max_rd_atomic = opt.rd_atomic;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

void Endpoint::connect(const Address& peer) {
  ASSERT_EQ(to_init(), 0);
  ASSERT_EQ(to_rtr(peer), 0);
  ASSERT_EQ(to_rts(), 0);
}

Address Endpoint::connect_over(Channel& ch, const std::function<void()>& before_ready) {
  ch.put(address());
  Address peer = ch.get<Address>();
  connect(peer);
  if (before_ready) before_ready();
  ch.sync();  // both sides in RTS before anyone sends
  return peer;
}

std::vector<ibv_wc> Endpoint::poll(int n, int timeout_ms) {
  std::vector<ibv_wc> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (int(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[16];
    int k = ibv_poll_cq(cq, 16, wc);
    if (k < 0) {
      ADD_FAILURE() << "ibv_poll_cq returned " << k;
      break;
    }
    out.insert(out.end(), wc, wc + k);
    if (k == 0) std::this_thread::yield();
  }
  return out;
}

ibv_qp_state Endpoint::qp_state() {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
  return a.qp_state;
}

int Endpoint::post_write(uint64_t wr_id, const Address& peer, size_t off, size_t len, bool signaled,
                         uint64_t remote_off, ibv_wr_opcode op, uint32_t imm, unsigned extra) {
  ibv_sge sge{uintptr_t(buf + off), uint32_t(len), mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = (signaled ? unsigned(IBV_SEND_SIGNALED) : 0u) | extra;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = peer.addr + remote_off;
  wr.wr.rdma.rkey = peer.rkey;
  return ibv_post_send(qp, &wr, &bad);
}

int Endpoint::post_send(uint64_t wr_id, size_t off, size_t len, bool signaled) {
  ibv_sge sge{uintptr_t(buf + off), uint32_t(len), mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = signaled ? unsigned(IBV_SEND_SIGNALED) : 0u;
  return ibv_post_send(qp, &wr, &bad);
}

int Endpoint::post_recv(uint64_t wr_id, size_t off, size_t len) {
  ibv_sge sge{uintptr_t(buf + off), uint32_t(len), mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(qp, &wr, &bad);
}

const char* wc_name(int s) { return ibv_wc_status_str(ibv_wc_status(s)); }

bool page_frames_readable() {
  static volatile char probe[8192];
  probe[4096] = 1;  // present
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t index = (uintptr_t(&probe[4096]) / page) * 8;
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint64_t entry = 0;
  const bool ok = pread(fd, &entry, sizeof entry, off_t(index)) == sizeof entry;
  close(fd);
  return ok && (entry & ((1ull << 55) - 1)) != 0;
}

}  // namespace fvtest
