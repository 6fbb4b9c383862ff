// fakeverbs: execution of RC work requests (execute.h).  Data moves with
// process_vm_writev/readv, so a write lands in the peer without the peer
// doing anything -- one-sided, as on hardware.
#include "execute.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fault.h"
#include "hca.h"
#include "port.h"

namespace fakeverbs {

void flush_locked(wire::QpShared* sh, wire::CqRing* cq) {
  for (; sh->rq_head != sh->rq_tail; ++sh->rq_head) {
    wire::Cqe e{};
    e.wr_id = sh->wqe(sh->rq_head)->wr_id;
    e.status = IBV_WC_WR_FLUSH_ERR;
    e.opcode = IBV_WC_RECV;
    e.qp_num = sh->qpn;
    if (cq) cq_push(cq, e);
  }
}

// The responder side of a failed operation: its QP enters the error state
// too (IB spec 9.9.3: responder class errors), flushing its receives.
// The owner learns of it by an affiliated asynchronous event, delivered by
// its next ibv_poll_cq (deliver_events).
void responder_error(wire::QpShared* peer, wire::CqRing* peer_cq, ibv_event_type ev) {
  SharedLock lk(&peer->mu);
  peer->state = IBV_QPS_ERR;
  if (!peer->pending_event) peer->pending_event = uint32_t(ev) + 1;
  flush_locked(peer, peer_cq);
}

namespace {

// MR check as done by an HCA for a local (lkey) or remote (rkey) access of
// [addr, addr+len) in the MR's IOVA space; on success `va` is where those
// bytes are in the owner's memory and `pin` names the registration.
struct MrHit {
  bool ok = false;
  bool relaxed = false;  // registered with IBV_ACCESS_RELAXED_ORDERING
  uint64_t va = 0;
  PinnedRange pin;
};

MrHit mr_lookup(wire::MrTable* t, uint32_t key, uint32_t pd, uint64_t addr, uint64_t len,
                unsigned need) {
  MrHit h;
  uint32_t slot = key >> 8;
  if (!t || slot == 0 || slot >= t->capacity) return h;
  SharedLock lk(&t->mu);
  wire::MrEntry& e = t->entries()[slot];
  // An MR whose registrant (an importer of the PD) died resolves to nothing.
  if (reap_if_dead_locked(t, e)) return h;
  if (e.key == key && e.pd_id == pd && addr >= e.iova && len <= e.length &&
      addr - e.iova <= e.length - len && (e.access & need) == need) {
    h.ok = true;
    h.relaxed = (e.access & IBV_ACCESS_RELAXED_ORDERING) != 0;
    h.va = e.addr + (addr - e.iova);
    h.pin = {mem_pid_of(t, e), e.key, e.addr};
  }
  return h;
}

class Executor {
 public:
  explicit Executor(Qp& qp) : qp_(qp) {}
  Outcome run(SendWr& w);

 private:
  bool resolve_peer(SendWr& w);
  // A DCI's destination, named by the WR (mlx5dv_wr_set_dc_addr).
  bool resolve_dct(SendWr& w);
  bool attach_peer(wire::QpShared* p);
  Outcome responder_fault(ibv_wc_status st) {
    // A DCT serves every DCI that knows its key: a bad request fails the
    // requester only (its DCI goes to the error state), not the DCT.
    if (peer_->dc_type != MLX5DV_DCTYPE_DCT) {
      responder_error(peer_, peer_cq_,
                      st == IBV_WC_REM_ACCESS_ERR ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR);
    }
    Outcome o;
    o.status = st;
    return o;
  }
  // The local gather/scatter list, translated through the QP's MRs; false if
  // an SGE is not inside an MR of the QP's PD with `need` access.
  bool local_side(SendWr& w, unsigned need, Side* out);
  // A WRITE's data movement: a failure to read the local side is the
  // requester's (LOC_PROT_ERR), to write the remote side the responder's.
  Outcome write_data(const Side& src, const Side& dst);
  Outcome send(SendWr& w, const Side& src, uint64_t len);
  Outcome write_imm(SendWr& w, const Side& src, const Side& dst, uint64_t len);

  Qp& qp_;
  wire::QpShared* peer_ = nullptr;
  wire::CqRing* peer_cq_ = nullptr;
  wire::MrTable* peer_mr_ = nullptr;
  // Where the peer's receives are: its own queue, or a DCT's SRQ.
  wire::QpShared* rq_ = nullptr;
};

// Finds the peer named by the QP's RTR attributes; false if it does not
// (yet) accept our packets -- on hardware those would be dropped and retried.
bool Executor::resolve_peer(SendWr& w) {
  if (w.dc) return resolve_dct(w);
  wire::QpShared* me = qp_.sh;
  std::string target =
      resolve_link(std::string("qpn.") + me->dest_key + "." + std::to_string(me->dest_qpn));
  if (target.empty()) return false;
  if (qp_.peer_qp_file.name() != target) {
    qp_.peer_cq_file.reset();
    qp_.peer_mr_file.reset();
    if (!qp_.peer_qp_file.open(target)) return false;
  }
  auto* p = static_cast<wire::QpShared*>(qp_.peer_qp_file.data());
  {
    SharedLock lk(&p->mu);
    if (p->magic != wire::kQpMagic || (p->state != IBV_QPS_RTR && p->state != IBV_QPS_RTS) ||
        p->dest_qpn != qp_.qpn() || strcmp(p->dest_key, me->local_key) != 0 ||
        now_ns() < p->port_down_until)  // its port is down: no answer, we retry
      return false;
  }
  return attach_peer(p);
}

// The peer's CQ, MR table (and SRQ) mapped; the files of the last peer are
// kept while it stays the same.
bool Executor::attach_peer(wire::QpShared* p) {
  if (!qp_.peer_cq_file && !qp_.peer_cq_file.open(p->recv_cq)) return false;
  if (!qp_.peer_mr_file && !qp_.peer_mr_file.open(p->mr_table)) return false;
  rq_ = p;
  if (p->dc_type == MLX5DV_DCTYPE_DCT) {
    if (!qp_.peer_srq_file && !qp_.peer_srq_file.open(p->srq)) return false;
    rq_ = static_cast<wire::QpShared*>(qp_.peer_srq_file.data());
    if (rq_->magic != wire::kSrqMagic) return false;
  }
  peer_ = p;
  peer_cq_ = static_cast<wire::CqRing*>(qp_.peer_cq_file.data());
  peer_mr_ = static_cast<wire::MrTable*>(qp_.peer_mr_file.data());
  return pid_alive(p->owner_pid);
}

// A DCT in RTR at the WR's address that holds the WR's access key. A key
// that does not match is a packet the DCT drops (and reports as a key
// violation to its owner, not modelled): the DCI hears nothing and retries
// until its retry count runs out (IBV_WC_RETRY_EXC_ERR), and no byte lands.
bool Executor::resolve_dct(SendWr& w) {
  const std::string target =
      resolve_link("qpn." + w.dc_dest_key + "." + std::to_string(w.dc_dctn));
  if (target.empty()) return false;
  if (qp_.peer_qp_file.name() != target) {
    qp_.peer_cq_file.reset();
    qp_.peer_mr_file.reset();
    qp_.peer_srq_file.reset();
    if (!qp_.peer_qp_file.open(target)) return false;
  }
  auto* p = static_cast<wire::QpShared*>(qp_.peer_qp_file.data());
  {
    SharedLock lk(&p->mu);
    if (p->magic != wire::kQpMagic || p->dc_type != MLX5DV_DCTYPE_DCT ||
        p->state != IBV_QPS_RTR || now_ns() < p->port_down_until)
      return false;
    if (p->dc_key != w.dc_key) {
      if (!w.dc_key_logged) {
        log_error("DCI 0x%x: wr_id %llu carries DC access key 0x%llx, DCT 0x%x holds another: "
                  "dropped, the DCI retries until its retry count runs out", qp_.qpn(),
                  (unsigned long long)w.wr_id, (unsigned long long)w.dc_key, w.dc_dctn);
        w.dc_key_logged = true;
      }
      return false;
    }
  }
  return attach_peer(p);
}

bool Executor::local_side(SendWr& w, unsigned need, Side* out) {
  if (w.is_inline) {
    if (!w.inline_data.empty()) {
      out->iov.push_back({w.inline_data.data(), w.inline_data.size()});
      out->pins.push_back({});
    }
    return true;
  }
  // An imported PD's MRs are in its owner's table (import.cc); each MR's
  // memory is its registrant's, so one gather list may span processes.
  wire::MrTable* own = qp_.pd->mr_table();
  for (const ibv_sge& s : w.sge) {
    if (!s.length) continue;
    MrHit h = mr_lookup(own, s.lkey, qp_.pd->id, s.addr, s.length, need);
    if (!h.ok) {
      log_error("QP 0x%x: local SGE (addr 0x%llx len %u lkey 0x%x) outside an MR of the "
                "QP's PD or lacking access -> IBV_WC_LOC_PROT_ERR", qp_.qpn(),
                (unsigned long long)s.addr, s.length, s.lkey);
      return false;
    }
    out->iov.push_back({reinterpret_cast<void*>(uintptr_t(h.va)), s.length});
    out->pins.push_back(h.pin);
  }
  return true;
}

Outcome Executor::write_data(const Side& src, const Side& dst) {
  Outcome o;
  switch (dma(src, dst, &qp_.rng, qp_.qpn())) {
    case DmaFail::kNone: break;
    case DmaFail::kSrc: o.status = IBV_WC_LOC_PROT_ERR; break;
    case DmaFail::kDst: return responder_fault(IBV_WC_REM_ACCESS_ERR);
  }
  return o;
}

Outcome Executor::run(SendWr& w) {
  Outcome o;
  const bool reads_into_local = w.opcode == IBV_WR_RDMA_READ || is_atomic(w.opcode);
  Side local;
  if (!local_side(w, reads_into_local ? IBV_ACCESS_LOCAL_WRITE : 0, &local)) {
    o.status = IBV_WC_LOC_PROT_ERR;
    return o;
  }
  if (reads_into_local && qp_.attr.max_rd_atomic == 0) {
    log_error("QP 0x%x: RDMA READ/atomic with max_rd_atomic = 0 -> IBV_WC_LOC_QP_OP_ERR", qp_.qpn());
    o.status = IBV_WC_LOC_QP_OP_ERR;
    return o;
  }
  const uint64_t len = w.total_len();
  if (len > 0x40000000ull) {
    o.status = IBV_WC_LOC_LEN_ERR;
    return o;
  }
  if (qp_.ctx->dev->port_state != IBV_PORT_ACTIVE || port::down(*qp_.ctx->dev) ||
      !resolve_peer(w)) {
    o.wait = true;
    return o;
  }
  uint32_t need = 0;
  switch (w.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      return send(w, local, len);
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: need = IBV_ACCESS_REMOTE_WRITE; break;
    case IBV_WR_RDMA_READ: need = IBV_ACCESS_REMOTE_READ; break;
    default: need = IBV_ACCESS_REMOTE_ATOMIC; break;
  }
  // Responder checks, in the order an HCA makes them.
  uint32_t peer_access, peer_pd, peer_rd;
  {
    SharedLock lk(&peer_->mu);
    peer_access = peer_->access_flags;
    peer_pd = peer_->pd_id;
    peer_rd = peer_->max_dest_rd_atomic;
  }
  if ((need != IBV_ACCESS_REMOTE_WRITE) && peer_rd == 0) {
    log_error("QP 0x%x: peer QP has max_dest_rd_atomic = 0 -> IBV_WC_REM_INV_REQ_ERR", qp_.qpn());
    return responder_fault(IBV_WC_REM_INV_REQ_ERR);
  }
  if (is_atomic(w.opcode) && (w.remote_addr % 8) != 0) {
    log_error("QP 0x%x: atomic on unaligned remote address 0x%llx -> IBV_WC_REM_INV_REQ_ERR",
              qp_.qpn(), (unsigned long long)w.remote_addr);
    return responder_fault(IBV_WC_REM_INV_REQ_ERR);
  }
  // A zero-length RDMA WRITE/READ checks no R_Key (IB spec 9.4.4).
  const bool check_rkey = len != 0 || is_atomic(w.opcode);
  MrHit h;
  if (check_rkey) h = mr_lookup(peer_mr_, w.rkey, peer_pd, w.remote_addr,
                                is_atomic(w.opcode) ? 8 : len, need);
  if (!(peer_access & need) || (check_rkey && !h.ok)) {
    log_error("QP 0x%x: remote access to 0x%llx len %llu rkey 0x%x denied (rkey invalid, "
              "out of the MR, other PD, or access flags of MR/QP lack 0x%x) -> "
              "IBV_WC_REM_ACCESS_ERR", qp_.qpn(), (unsigned long long)w.remote_addr,
              (unsigned long long)len, w.rkey, need);
    return responder_fault(IBV_WC_REM_ACCESS_ERR);
  }
  Side remote;
  if (len) {
    remote.iov.push_back({reinterpret_cast<void*>(uintptr_t(h.va)), size_t(len)});
    remote.pins.push_back(h.pin);
  }
  if (w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) return write_imm(w, local, remote, len);
  if (w.opcode == IBV_WR_RDMA_WRITE) {
    // Relaxed ordering: half of the writes (a draw from the QP's stream) are
    // held and land when their "late" time comes (post.cc), so a later WR's
    // data may be seen first. Without jitter nothing is late.
    if (h.relaxed && len && hca::jitter_ns() && (next_random(qp_.rng) & 1)) {
      o.response.resize(len);
      Side staging;
      staging.iov.push_back({o.response.data(), size_t(len)});
      staging.pins.resize(1);
      if (dma(local, staging, nullptr, qp_.qpn()) != DmaFail::kNone) {
        o.status = IBV_WC_LOC_PROT_ERR;
        o.response.clear();
        return o;
      }
      o.relaxed = true;
      o.remote = std::move(remote);
      return o;
    }
    return write_data(local, remote);
  }
  if (w.opcode == IBV_WR_RDMA_READ) {
    o.response.resize(len);
    Side staging;
    if (len) staging.iov.push_back({o.response.data(), size_t(len)});
    staging.pins.resize(staging.iov.size());
    if (dma(remote, staging, nullptr, qp_.qpn()) != DmaFail::kNone)
      return responder_fault(IBV_WC_REM_ACCESS_ERR);
    o.local = std::move(local);
    o.byte_len = uint32_t(len);
    return o;
  }
  // Atomics: serialised per target process, read-modify-write of 8 bytes.
  const pid_t pid = h.pin.pid;  // whose memory the MR is (the PD owner's or an importer's)
  uint64_t old = 0, val;
  iovec lo{&old, 8}, ro{reinterpret_cast<void*>(uintptr_t(h.va)), 8};
  {
    SharedLock lk(&peer_mr_->atomic_mu);
    if (process_vm_readv(pid, &lo, 1, &ro, 1, 0) != 8) return responder_fault(IBV_WC_REM_ACCESS_ERR);
    if (w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) val = old + w.compare_add;
    else val = old == w.compare_add ? w.swap : old;
    iovec li{&val, 8};
    if (val != old && process_vm_writev(pid, &li, 1, &ro, 1, 0) != 8)
      return responder_fault(IBV_WC_REM_ACCESS_ERR);
  }
  o.response.resize(8);
  memcpy(o.response.data(), &old, 8);
  o.local = std::move(local);
  o.byte_len = 8;
  return o;
}

Outcome Executor::write_imm(SendWr& w, const Side& src, const Side& dst, uint64_t len) {
  Outcome o;
  {
    SharedLock lk(&rq_->mu);
    if (rq_->rq_head == rq_->rq_tail) {  // consumes a receive: RNR if none
      o.wait = o.rnr = true;
      return o;
    }
  }
  if (Outcome d = write_data(src, dst); d.status != IBV_WC_SUCCESS) return d;
  // Data first, then the completion: the receiver can trust its buffer
  // once it has polled IBV_WC_RECV_RDMA_WITH_IMM (man ibv_post_send: the
  // immediate "is delivered after the data") -- earlier relaxed writes' too:
  // the completion is written without relaxed ordering, so it cannot pass
  // them.
  flush_relaxed(qp_);
  SharedLock lk(&rq_->mu);
  wire::Cqe e{};
  e.wr_id = rq_->wqe(rq_->rq_head)->wr_id;
  rq_->rq_head++;
  e.status = IBV_WC_SUCCESS;
  e.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  e.byte_len = uint32_t(len);
  e.imm_data = w.imm;
  e.wc_flags = IBV_WC_WITH_IMM;
  e.qp_num = peer_->qpn;
  e.src_qp = qp_.qpn();
  e.solicited = (w.flags & IBV_SEND_SOLICITED) != 0;
  // An overrun CQ fails the QP it serves (under the SRQ's mutex for a DCT:
  // the DCT's own is not held, and its state word is written alone).
  if (!fault::drop_cqe() && !cq_push(peer_cq_, e)) peer_->state = IBV_QPS_ERR;
  return o;
}

Outcome Executor::send(SendWr& w, const Side& src, uint64_t len) {
  Outcome o;
  SharedLock lk(&peer_->mu);
  if (peer_->rq_head == peer_->rq_tail) {
    o.wait = o.rnr = true;
    return o;
  }
  wire::RecvWqe* r = peer_->wqe(peer_->rq_head);
  wire::Cqe e{};
  e.wr_id = r->wr_id;
  e.opcode = IBV_WC_RECV;
  e.qp_num = peer_->qpn;
  e.src_qp = qp_.qpn();
  e.solicited = (w.flags & IBV_SEND_SOLICITED) != 0;
  Side dst;
  uint64_t room = 0;
  ibv_wc_status recv_status = IBV_WC_SUCCESS;
  for (uint32_t i = 0; i < r->num_sge && room < len; ++i) {
    const ibv_sge& s = r->sge()[i];
    if (!s.length) continue;
    uint64_t take = std::min<uint64_t>(s.length, len - room);
    MrHit h = mr_lookup(peer_mr_, s.lkey, peer_->pd_id, s.addr, s.length, IBV_ACCESS_LOCAL_WRITE);
    if (!h.ok) {
      recv_status = IBV_WC_LOC_PROT_ERR;
      break;
    }
    dst.iov.push_back({reinterpret_cast<void*>(uintptr_t(h.va)), size_t(take)});
    dst.pins.push_back(h.pin);
    room += take;
  }
  if (recv_status == IBV_WC_SUCCESS && room < len) recv_status = IBV_WC_LOC_LEN_ERR;
  if (recv_status == IBV_WC_SUCCESS && dma(src, dst, &qp_.rng, qp_.qpn()) != DmaFail::kNone)
    recv_status = IBV_WC_LOC_PROT_ERR;
  if (recv_status == IBV_WC_SUCCESS) flush_relaxed(qp_);  // as in write_imm
  peer_->rq_head++;
  e.status = recv_status;
  e.byte_len = uint32_t(len);
  if (w.opcode == IBV_WR_SEND_WITH_IMM) {
    e.imm_data = w.imm;
    e.wc_flags = IBV_WC_WITH_IMM;
  }
  if (recv_status != IBV_WC_SUCCESS) {
    log_error("QP 0x%x: SEND of %llu bytes into peer QP 0x%x: receive buffer %s", qp_.qpn(),
              (unsigned long long)len, peer_->qpn,
              recv_status == IBV_WC_LOC_LEN_ERR ? "too small" : "not in a writable MR of its PD");
    cq_push(peer_cq_, e);
    peer_->state = IBV_QPS_ERR;
    if (!peer_->pending_event) peer_->pending_event = uint32_t(IBV_EVENT_QP_FATAL) + 1;
    flush_locked(peer_, peer_cq_);
    o.status = recv_status == IBV_WC_LOC_LEN_ERR ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR;
    return o;
  }
  if (!fault::drop_cqe() && !cq_push(peer_cq_, e)) peer_->state = IBV_QPS_ERR;
  return o;
}

}  // namespace

Outcome execute(Qp& qp, SendWr& w) {
  Executor ex(qp);
  return ex.run(w);
}

// The response of a READ/atomic reaches local memory (and the WR completes)
// once `ready_ns` passed; placed with the fake's DMA, into pages checked for
// staleness like any other.
void place_response(Qp& qp, Outcome& o) {
  if (o.response.empty()) return;
  Side src;
  src.iov.push_back({o.response.data(), o.response.size()});
  src.pins.resize(1);
  if (o.relaxed) {
    // The peer's memory; a failure there is the responder's (its process
    // gone or the pages unmapped), as for a write placed at once.
    if (dma(src, o.remote, &qp.rng, qp.qpn()) != DmaFail::kNone) o.status = IBV_WC_REM_ACCESS_ERR;
    o.relaxed = false;
    o.response.clear();
    return;
  }
  if (dma(src, o.local, &qp.rng, qp.qpn()) != DmaFail::kNone) o.status = IBV_WC_LOC_PROT_ERR;
}

void flush_relaxed(Qp& qp) {
  for (Qp::Executed& x : qp.executed) {
    if (x.outcome->relaxed) place_response(qp, *x.outcome);
  }
}

}  // namespace fakeverbs
