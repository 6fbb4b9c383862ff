// fakeverbs: ibv_post_send / ibv_post_recv as reached through the context
// ops table by the inline functions of verbs.h.  Everything that a driver
// rejects at post time is rejected here with the first bad WR in *bad_wr;
// everything an HCA detects later is reported by a completion (post.cc).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "fault.h"
#include "hca.h"
#include "objects.h"
#include "port.h"

namespace fakeverbs {


namespace {

const char* check_send_wr(const Qp& qp, const ibv_send_wr& w) {
  switch (w.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      break;
    default:
      return "opcode not supported on an RC QP by fakeverbs";
  }
  const unsigned known = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;
  if (w.send_flags & ~known) return "unknown send_flags";
  if (w.num_sge < 0 || uint32_t(w.num_sge) > qp.cap.max_send_sge)
    return "num_sge above the QP's max_send_sge";
  if (w.num_sge > 0 && !w.sg_list) return "sg_list is NULL";
  const bool atomic = w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
  if (atomic && (w.num_sge != 1 || w.sg_list[0].length != 8))
    return "atomics need exactly one 8-byte SGE for the original value";
  if (w.send_flags & IBV_SEND_INLINE) {
    if (atomic || w.opcode == IBV_WR_RDMA_READ) return "IBV_SEND_INLINE on a READ/atomic";
    uint64_t n = 0;
    for (int i = 0; i < w.num_sge; ++i) n += w.sg_list[i].length;
    if (n > qp.cap.max_inline_data) return "inline data larger than the QP's max_inline_data";
  }
  return nullptr;
}

// Work requests of this process posted with IBV_SEND_INLINE, and the most
// bytes one carried (fakeverbs_inline_posts).
std::atomic<uint64_t> g_inline_posts{0};
std::atomic<uint64_t> g_inline_max{0};

void count_inline(const ibv_send_wr& w) {
  uint64_t n = 0;
  for (int i = 0; i < w.num_sge; ++i) n += w.sg_list[i].length;
  g_inline_posts.fetch_add(1, std::memory_order_relaxed);
  uint64_t m = g_inline_max.load(std::memory_order_relaxed);
  while (n > m && !g_inline_max.compare_exchange_weak(m, n, std::memory_order_relaxed)) {
  }
}

}  // namespace

// Test hook (FAKEVERBS_PRIVATE, not rdma-core): how many work requests this
// process posted inline, and (*max_bytes) the most bytes one of them carried.
FV_EXPORT uint64_t fakeverbs_inline_posts(uint64_t* max_bytes) {
  if (max_bytes) *max_bytes = g_inline_max.load(std::memory_order_relaxed);
  return g_inline_posts.load(std::memory_order_relaxed);
}

namespace {

// FAKEVERBS_FAULT's port rules at this ibv_post_send (fault.h): before the
// QP's mutex is taken, since moving the port's QPs to a new address takes
// every QP's (port.h).
void port_faults(const Qp& qp) {
  const DeviceSpec& d = *qp.ctx->dev;
  if (fault::port_down_now()) {
    log_error("FAKEVERBS_FAULT: the port of QP 0x%x goes down", qp.qpn());
    port::go_down(d, UINT64_MAX);
  }
  if (const uint64_t ns = fault::port_flap_now()) {
    log_error("FAKEVERBS_FAULT: the port of QP 0x%x goes down for %llu ms", qp.qpn(),
              (unsigned long long)(ns / 1'000'000));
    port::go_down(d, ns);
  }
  if (fault::lid_change_now()) {
    log_error("FAKEVERBS_FAULT: the port of QP 0x%x gets a new LID", qp.qpn());
    port::change_lid(d);
  }
  if (fault::gid_change_now()) {
    log_error("FAKEVERBS_FAULT: GID 0 of the port of QP 0x%x changes", qp.qpn());
    port::change_gid(d);
  }
}

}  // namespace

void enqueue_send(Qp& qp, SendWr&& w, uint64_t delay) {
  // Counted in the MR's entry (the PD's table), so that its registrant's
  // ibv_dereg_mr sees this WR whichever process posted it.
  for (const ibv_sge& s : w.sge) {
    if (MrRef r; mr_use(qp.pd->mr_table(), s.lkey, qp.pd->id, &r)) w.pinned.push_back(r);
  }
  // Due time: posting time plus the QP's jitter (and any injected delay),
  // never before the previous WR of the QP (one QP executes in order).
  const uint64_t j = hca::jitter_ns();
  uint64_t due = now_ns() + delay + (j ? next_random(qp.rng) % (j + 1) : 0);
  due = std::max(due, qp.last_due_ns);
  qp.last_due_ns = due;
  w.not_before_ns = due;
  const uint32_t dest = w.dc ? w.dc_dctn : qp.attr.dest_qp_num;
  w.forced_status = fault::wr_status(dest, ++qp.posted, &qp.fault_rng);
  qp.sq.push_back(std::move(w));
  qp.sq_used++;
}

int post_send_op(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad) {
  const hca::PostCpu accounted;  // FAKEVERBS_CPU_FILE: the fake driver's share
  Qp* qp = owner_of<Qp>(q);
  if (!qp) return fail(EINVAL);
  port_faults(*qp);
  std::lock_guard<std::mutex> g(qp->mu);
  if (fault::fail_post_send()) {
    log_error("FAKEVERBS_FAULT: failing ibv_post_send on QP 0x%x", qp->qpn());
    *bad = wr;
    return fail(ENOMEM);
  }
  if (fault::qp_error_now()) {
    log_error("FAKEVERBS_FAULT: moving QP 0x%x to the error state", qp->qpn());
    qp->set_state(IBV_QPS_ERR);
    flush_recv_queue(qp->sh, qp->recv_cq->ring);
    ibv_async_event ev{};
    ev.element.qp = q;
    ev.event_type = IBV_EVENT_QP_FATAL;
    qp->ctx->push_async(ev);
  }
  const ibv_qp_state st = qp->state();
  // Posting to the send queue is allowed in RTS, and in ERR where the WR is
  // completed with IBV_WC_WR_FLUSH_ERR (IB spec 10.8.3.x, man ibv_post_send).
  if (st != IBV_QPS_RTS && st != IBV_QPS_ERR) {
    log_error("ibv_post_send: QP 0x%x is not in RTS (EINVAL)", qp->qpn());
    *bad = wr;
    return fail(EINVAL);
  }
  const uint64_t delay = fault::delay_ns();
  int rc = 0;
  for (; wr; wr = wr->next) {
    if (const char* why = check_send_wr(*qp, *wr)) {
      log_error("ibv_post_send: QP 0x%x wr_id %llu: %s (EINVAL)", qp->qpn(),
                (unsigned long long)wr->wr_id, why);
      rc = EINVAL;
      break;
    }
    if (qp->sq_used.load() >= qp->cap.max_send_wr) {
      log_error("ibv_post_send: QP 0x%x send queue full (%u WRs posted and not retired by a "
                "polled completion) (ENOMEM)", qp->qpn(), qp->cap.max_send_wr);
      rc = ENOMEM;
      break;
    }
    SendWr w;
    w.wr_id = wr->wr_id;
    w.opcode = wr->opcode;
    w.flags = wr->send_flags;
    w.imm = wr->imm_data;
    w.is_inline = wr->send_flags & IBV_SEND_INLINE;
    if (w.is_inline) count_inline(*wr);
    if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      w.remote_addr = wr->wr.atomic.remote_addr;
      w.rkey = wr->wr.atomic.rkey;
      w.compare_add = wr->wr.atomic.compare_add;
      w.swap = wr->wr.atomic.swap;
    } else if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) {
      w.remote_addr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
    }
    for (int i = 0; i < wr->num_sge; ++i) {
      const ibv_sge& s = wr->sg_list[i];
      if (w.is_inline) {
        // Inline data is copied at post time; the buffer is free on return.
        const auto* p = reinterpret_cast<const uint8_t*>(uintptr_t(s.addr));
        w.inline_data.insert(w.inline_data.end(), p, p + s.length);
      } else {
        w.sge.push_back(s);
      }
    }
    enqueue_send(*qp, std::move(w), delay);
  }
  if (rc) *bad = wr;
  hca::kick();  // the "doorbell": nothing moves before ibv_post_send returns
  return rc ? fail(rc) : 0;
}

int post_recv_op(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp* qp = owner_of<Qp>(q);
  if (!qp) return fail(EINVAL);
  if (fault::fail_post_recv()) {
    log_error("FAKEVERBS_FAULT: failing ibv_post_recv on QP 0x%x", qp->qpn());
    *bad = wr;
    return fail(ENOMEM);
  }
  if (qp->dc_type) {
    log_error("ibv_post_recv: QP 0x%x is a DC QP: no receive queue of its own (a DCT's "
              "receives go to its SRQ) (EINVAL)", qp->qpn());
    *bad = wr;
    return fail(EINVAL);
  }
  wire::QpShared* sh = qp->sh;
  SharedLock lk(&sh->mu);
  if (sh->state == IBV_QPS_RESET) {
    log_error("ibv_post_recv: QP 0x%x is in RESET (EINVAL)", qp->qpn());
    *bad = wr;
    return fail(EINVAL);
  }
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->cap.max_recv_sge ||
        (wr->num_sge > 0 && !wr->sg_list)) {
      log_error("ibv_post_recv: QP 0x%x num_sge %d above max_recv_sge %u (EINVAL)", qp->qpn(),
                wr->num_sge, qp->cap.max_recv_sge);
      *bad = wr;
      return fail(EINVAL);
    }
    if (sh->state == IBV_QPS_ERR) {
      wire::Cqe e{};
      e.wr_id = wr->wr_id;
      e.status = IBV_WC_WR_FLUSH_ERR;
      e.opcode = IBV_WC_RECV;
      e.qp_num = sh->qpn;
      cq_push(qp->recv_cq->ring, e);
      continue;
    }
    if (sh->rq_tail - sh->rq_head >= sh->rq_cap) {
      log_error("ibv_post_recv: QP 0x%x receive queue full (%u) (ENOMEM)", qp->qpn(), sh->rq_cap);
      *bad = wr;
      return fail(ENOMEM);
    }
    wire::RecvWqe* r = sh->wqe(sh->rq_tail);
    r->wr_id = wr->wr_id;
    r->num_sge = uint32_t(wr->num_sge);
    if (wr->num_sge) memcpy(r->sge(), wr->sg_list, sizeof(ibv_sge) * size_t(wr->num_sge));
    sh->rq_tail++;
  }
  return 0;
}

}  // namespace fakeverbs
