// fakeverbs tests: multi-process harness.
//
// run_pair() forks two processes (A and B) joined by a socketpair; each runs
// its role and exits 0 only if it had no gtest failure.  The parent waits
// with a deadline and kills both on timeout, so a test can fail but never
// hang.  Each test gets a fresh rendezvous directory (FAKEVERBS_DIR) that
// must be gone after both processes exit.
//
// Endpoint owns one device context + PD + CQ + RC QP + registered buffer
// (RAII, destroyed in reverse order) and moves the QP through the states
// with the attributes a real application uses, exchanging (LID, GID, QPN)
// over the channel exactly as on hardware.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fvtest {

class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  void send(const void* p, size_t n);
  void recv(void* p, size_t n);  // fails the test after 10 s
  template <class T> void put(const T& v) { send(&v, sizeof v); }
  template <class T> T get() {
    T v{};
    recv(&v, sizeof v);
    return v;
  }
  // Passes a descriptor to the peer (SCM_RIGHTS), e.g. a context's cmd_fd.
  void send_fd(int fd);
  int recv_fd();  // -1 on failure
  void sync() {  // rendezvous of both sides
    put<int>(0);
    (void)get<int>();
  }

 private:
  int fd_;
};

using Role = std::function<void(Channel&)>;
// Runs a and b in two child processes; env entries "K=V" are set in each
// child (a_env only in A, b_env only in B) before the role starts.
void run_pair(const Role& a, const Role& b, const std::vector<std::string>& a_env = {},
              const std::vector<std::string>& b_env = {}, int timeout_s = 30);
// A process of run_group: reaches process j through to(j) (one socket per
// pair, so a process's exit shows as EOF to each peer).
class Mesh {
 public:
  Mesh(int self, const std::vector<int>& fds);
  Channel& to(int j) { return ch_.at(size_t(j)); }
  const int self;

 private:
  std::vector<Channel> ch_;  // by peer index; ch_[self] unused
};
using GroupRole = std::function<void(Mesh&)>;
// Runs roles[i] in child process i (named A, B, C...); env[i] as in run_pair.
void run_group(const std::vector<GroupRole>& roles,
               const std::vector<std::vector<std::string>>& env = {}, int timeout_s = 30);
// Runs one role in a child process.
void run_one(const Role& a, const std::vector<std::string>& env = {}, int timeout_s = 30);

struct Address {
  uint16_t lid;
  ibv_gid gid;
  uint32_t qpn;
  uint64_t addr;  // registered buffer
  uint32_t rkey;
};

struct EndpointOptions {
  int device = 0;
  int cqe = 64;
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 4;
  uint32_t max_inline = 64;
  size_t buf_size = 4096;
  int mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                  IBV_ACCESS_REMOTE_ATOMIC;
  int qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  uint8_t timeout = 12;    // 16.8 ms local ACK timeout
  uint8_t retry_cnt = 2;
  uint8_t rnr_retry = 7;   // forever
  uint8_t min_rnr_timer = 12;
  uint8_t rd_atomic = 4;
  bool comp_channel = false;  // the CQ gets a completion channel
  // Build CQ + QP on this PD (and its context), owned by the caller (e.g.
  // imported): no buffer or MR of our own.
  ibv_pd* shared_pd = nullptr;
};

class Endpoint {
 public:
  explicit Endpoint(const EndpointOptions& o = {});
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  Address address() const;
  int to_init();
  int to_rtr(const Address& peer);
  int to_rts();
  // INIT + RTR + RTS against `peer`; asserts success.
  void connect(const Address& peer);
  // Swaps addresses over the channel and connects; before_ready runs once
  // the QP is in RTS (receives may be posted from INIT on, not in RESET)
  // and before the peer is told it may send.
  Address connect_over(Channel& ch, const std::function<void()>& before_ready = {});
  // Connects the QP to itself (loopback).
  void connect_self() { connect(address()); }

  // Polls until n completions arrived or ~5 s passed.
  std::vector<ibv_wc> poll(int n, int timeout_ms = 5000);
  ibv_qp_state qp_state();

  int post_write(uint64_t wr_id, const Address& peer, size_t off, size_t len, bool signaled,
                 uint64_t remote_off = 0, ibv_wr_opcode op = IBV_WR_RDMA_WRITE, uint32_t imm = 0,
                 unsigned extra_flags = 0);
  int post_send(uint64_t wr_id, size_t off, size_t len, bool signaled = true);
  int post_recv(uint64_t wr_id, size_t off, size_t len);

  EndpointOptions opt;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* buf = nullptr;
  bool roce = false;

 private:
  bool borrowed_ = false;  // ctx and pd belong to the caller
};

const char* wc_name(int status);

// True if /proc/self/pagemap shows page frame numbers (CAP_SYS_ADMIN, i.e.
// root as in CI).  Without them fakeverbs sees only pages that vanished, not
// pages replaced by others (FIDELITY.md, "Registered memory is pinned").
bool page_frames_readable();

}  // namespace fvtest
