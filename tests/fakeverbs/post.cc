// fakeverbs: the send queue's life on the fake HCA -- when work requests
// execute (execute.h does how), their completions in order, retirement.
//
// Execution model: ibv_post_send validates and queues a private copy of each
// WR and wakes the process's hca thread (hca.h), which executes queued WRs in
// order once due (posting time + per-QP jitter); a WR that cannot execute yet
// (peer not ready, receiver not ready = RNR, injected delay) stays at the
// head and is retried by the thread until the transport or RNR retry budget
// of the QP runs out.
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fault.h"
#include "hca.h"
#include "execute.h"

namespace fakeverbs {

void release_pins(std::vector<MrRef>& pins) {
  for (const MrRef& r : pins) mr_unuse(r);
  pins.clear();
}

uint64_t SendWr::total_len() const {
  if (is_inline) return inline_data.size();
  uint64_t n = 0;
  for (const ibv_sge& s : sge) n += s.length;
  return n;
}

namespace {

ibv_wc_opcode send_wc_opcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
  }
}

// IB spec table 45 (RNR NAK timer field), microseconds.
constexpr uint32_t kRnrUs[32] = {655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320,
                                 480, 640, 960, 1280, 1920, 2560, 3840, 5120, 7680,
                                 10240, 15360, 20480, 30720, 40960, 61440, 81920,
                                 122880, 163840, 245760, 327680, 491520};

// Retry budget of the QP for a WR waiting since `first`.
bool budget_left(const Qp& qp, const SendWr& w, bool rnr, uint32_t peer_rnr_timer) {
  uint64_t elapsed = now_ns() - w.first_try_ns;
  if (rnr) {
    if (qp.attr.rnr_retry == 7) return true;  // 7 = retry forever
    return elapsed < uint64_t(kRnrUs[peer_rnr_timer & 31]) * 1000 * (qp.attr.rnr_retry + 1u);
  }
  if (qp.attr.timeout == 0) return true;  // 0 = infinite local ACK timeout
  return elapsed < (4096ull << qp.attr.timeout) * (qp.attr.retry_cnt + 1u);
}

// Caller holds qp.mu.
void complete(Qp& qp, SendWr& w, ibv_wc_status st, uint32_t byte_len) {
  qp.open_count++;
  for (const MrRef& r : w.pinned) qp.open_pins.push_back(r);
  w.pinned.clear();
  const bool signaled = qp.sq_sig_all || (w.flags & IBV_SEND_SIGNALED);
  if (st == IBV_WC_SUCCESS && !signaled) return;  // errors always complete
  uint32_t seq = qp.next_seq++;
  if (seq == 0) seq = qp.next_seq++;
  qp.groups.push_back({seq, qp.open_count, std::move(qp.open_pins)});
  qp.open_pins.clear();
  qp.open_count = 0;
  if (fault::drop_cqe()) return;
  wire::Cqe e{};
  e.wr_id = w.wr_id;
  e.status = st;
  e.opcode = send_wc_opcode(w.opcode);
  e.byte_len = byte_len;
  e.qp_num = qp.qpn();
  e.retire = seq;
  if (!cq_push(qp.send_cq->ring, e)) qp.set_state(IBV_QPS_ERR);
}

}  // namespace

void flush_recv_queue(wire::QpShared* sh, wire::CqRing* cq) {
  SharedLock lk(&sh->mu);
  flush_locked(sh, cq);
}

Qp::Qp() = default;  // here, where Outcome is complete
Qp::~Qp() = default;

void drop_executed(Qp& qp) {
  for (Qp::Executed& x : qp.executed) release_pins(x.w.pinned);
  qp.executed.clear();
}

namespace {

uint32_t responses_outstanding(const Qp& qp) {
  uint32_t n = 0;
  for (const Qp::Executed& x : qp.executed)
    n += x.w.opcode == IBV_WR_RDMA_READ || is_atomic(x.w.opcode);
  return n;
}

// Completes executed WRs in posting order, as far as their responses are in.
// Returns the earliest time the next one will be, or UINT64_MAX if none left.
uint64_t retire_executed(Qp& qp) {
  const uint64_t now = now_ns();
  while (!qp.executed.empty()) {
    Qp::Executed& x = qp.executed.front();
    if (x.ready_ns > now) return x.ready_ns;
    if (x.outcome->status == IBV_WC_SUCCESS) place_response(qp, *x.outcome);
    const ibv_wc_status st = x.outcome->status;
    complete(qp, x.w, st, x.outcome->byte_len);
    qp.executed.pop_front();
    if (st != IBV_WC_SUCCESS) {
      qp.set_state(IBV_QPS_ERR);
      flush_recv_queue(qp.sh, qp.recv_cq->ring);
    }
  }
  return UINT64_MAX;
}

}  // namespace

uint64_t progress(Qp& qp) {
  for (;;) {
    const uint64_t pending = retire_executed(qp);
    if (qp.sq.empty()) return pending;
    SendWr& w = qp.sq.front();
    if (qp.state() == IBV_QPS_ERR) {
      if (!qp.executed.empty()) return pending;  // completions stay in order
      complete(qp, w, IBV_WC_WR_FLUSH_ERR, 0);
      qp.sq.pop_front();
      continue;
    }
    const uint64_t now = now_ns();
    if (w.not_before_ns > now) return std::min(pending, w.not_before_ns);
    // IBV_SEND_FENCE: wait for the responses of earlier READ/atomics.  And
    // at most max_rd_atomic of them outstanding, as the QP was created.
    const bool wants_response = w.opcode == IBV_WR_RDMA_READ || is_atomic(w.opcode);
    if ((w.flags & IBV_SEND_FENCE) && responses_outstanding(qp)) return pending;
    if (wants_response && qp.attr.max_rd_atomic &&
        responses_outstanding(qp) >= qp.attr.max_rd_atomic)
      return pending;
    if (!w.first_try_ns) w.first_try_ns = now;
    auto o = std::make_unique<Outcome>();
    if (w.forced_status >= 0) {
      o->status = ibv_wc_status(w.forced_status);
    } else {
      *o = execute(qp, w);
      if (o->wait) {
        uint32_t rnr_timer = 0;
        if (o->rnr && qp.peer_qp_file)
          rnr_timer = static_cast<wire::QpShared*>(qp.peer_qp_file.data())->min_rnr_timer;
        if (budget_left(qp, w, o->rnr, rnr_timer)) return std::min(pending, kBlocked);
        o->status = o->rnr ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_RETRY_EXC_ERR;
        log_error("QP 0x%x: %s", qp.qpn(), o->rnr ? "receiver not ready, RNR retries exhausted"
                                                  : "peer unreachable, transport retries exhausted");
      }
    }
    // A response travels back: it arrives after a jitter of its own, and
    // later WRs may execute meanwhile. A held relaxed-ordering write lands
    // after a jitter too (execute.h).
    uint64_t ready = now;
    if ((wants_response || o->relaxed) && o->status == IBV_WC_SUCCESS && hca::jitter_ns())
      ready += next_random(qp.rng) % (hca::jitter_ns() + 1);
    const bool failed = o->status != IBV_WC_SUCCESS;
    qp.executed.push_back({std::move(w), std::move(o), ready});
    qp.sq.pop_front();
    if (failed) {
      // The QP stops executing at an error; later WRs are flushed once
      // everything before has completed.
      qp.set_state(IBV_QPS_ERR);
    }
  }
}

void deliver_events(Context& ctx) {
  std::lock_guard<std::mutex> g(ctx.mu);
  for (auto& [qpn, qp] : ctx.qps) {
    uint32_t ev;
    {
      SharedLock lk(&qp->sh->mu);
      ev = qp->sh->pending_event;
      qp->sh->pending_event = 0;
    }
    if (ev) {
      ibv_async_event a{};
      a.element.qp = &qp->shell.ibv;
      a.event_type = ibv_event_type(ev - 1);
      ctx.push_async(a);
    }
  }
}

void retire_send_cqe(Context& ctx, uint32_t qpn, uint32_t seq) {
  std::lock_guard<std::mutex> g(ctx.mu);
  auto it = ctx.qps.find(qpn);
  if (it == ctx.qps.end()) return;  // QP destroyed meanwhile
  Qp& qp = *it->second;
  std::lock_guard<std::mutex> q(qp.mu);
  // Polling a completion frees its WR and every earlier one (selective
  // signalling), including those whose own CQE was lost.
  while (!qp.groups.empty() && int32_t(qp.groups.front().seq - seq) <= 0) {
    qp.sq_used -= qp.groups.front().count;
    release_pins(qp.groups.front().pins);
    qp.groups.pop_front();
  }
}

}  // namespace fakeverbs
