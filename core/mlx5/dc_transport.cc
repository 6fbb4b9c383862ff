#include "core/mlx5/dc_transport.h"

#include <arpa/inet.h>
#include <sched.h>

#include <chrono>

#include "core/arch.h"
#include "core/log.h"
#include "core/mlx5/endpoint_pool.h"

namespace mlxa2a::mlx5 {

namespace {

constexpr std::size_t kPiece = std::size_t{1} << 30;  // an SGE's length is 32 bits
constexpr std::size_t kMaxPieces = 8;                 // areas are far below 8 GiB

// One WR of a message on a DCI being built (ibv_wr_start ... complete):
// the write (with immediate if `imm`), its gather entry (none for 0 bytes:
// a 0-length SGE means 2 GiB to some HCAs) and its destination DCT.
void add_write(ibv_qp_ex* x, mlx5dv_qp_ex* dv, ibv_ah* ah, std::uint32_t dctn, std::uint64_t key,
               std::uint64_t wr_id, bool last, const std::uint32_t* imm, std::uint32_t rkey,
               std::uint64_t remote, std::uint32_t lkey, const char* local, std::size_t len) {
  x->wr_id = wr_id;
  x->wr_flags = last ? IBV_SEND_SIGNALED : 0;
  if (imm) {
    ibv_wr_rdma_write_imm(x, rkey, remote, htonl(*imm));
  } else {
    ibv_wr_rdma_write(x, rkey, remote);
  }
  if (len != 0) {
    ibv_wr_set_sge(x, lkey, reinterpret_cast<std::uintptr_t>(local), static_cast<std::uint32_t>(len));
  } else {
    ibv_wr_set_sge_list(x, 0, nullptr);
  }
  mlx5dv_wr_set_dc_addr(dv, ah, dctn, key);
}

}  // namespace

DcLeaderTransport::~DcLeaderTransport() = default;

Status DcLeaderTransport::post_receives(std::uint32_t n) noexcept {
  const Verbs& v = dev_->verbs();
  for (std::uint32_t i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = 1;
    if (v.post_srq_recv(srq_.get(), &wr, &bad) != 0) return Status::net_failed;
  }
  return Status::ok;
}

Status DcLeaderTransport::poll() noexcept {
  ibv_wc wc[32];
  for (;;) {
    // An overrun CQ says so only by an async event (the pool reads them).
    cq_failed_ = cq_failed_ || pool_->device_failed();
    const int n = cq_failed_ ? -1 : Verbs::poll_cq(cq_.get(), 32, wc);
    if (n < 0) {
      cq_failed_ = true;
      return Status::net_failed;
    }
    std::uint32_t consumed = 0;
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      if (w.status != IBV_WC_SUCCESS) {
        // (An error completion's opcode is undefined: only its status says.
        // A flushed one follows the error that failed its DCI.)
        const Verbs& v = dev_->verbs();
        if (w.status != IBV_WC_WR_FLUSH_ERR || !book_.on()) {
          MLXA2A_LOG(Warn, "DC: a completion failed: %s",
                     v.wc_status_str ? v.wc_status_str(w.status) : "error");
        }
        // A receive's (wr_id 1; ours are even): the DCT or SRQ failed.
        if (!book_.on() || (w.wr_id & 1) != 0) {
          cq_failed_ = true;
          return Status::net_failed;
        }
        count_error(w);
        continue;
      }
      if (w.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        const std::uint32_t imm = ntohl(w.imm_data);
        const int par = static_cast<int>(imm & 1);
        const std::size_t from = (imm >> 1) & (wire::kMaxMembers - 1);
        if (from < slot_.sent_to.size()) slot_.from[par][from].fetch_add(1);
        slot_.arrived[par].fetch_add(1);
        ++consumed;
        continue;
      }
      // Our signalled write: it retires its message's WRs (a DCI completes
      // in order); wr_id names the DCI, the partner, and a keep-alive.
      retire_message(dci_of(w.wr_id));
      if ((w.wr_id & 2) != 0) {
        slot_.alive.fetch_add(1);
        continue;
      }
      if (const std::size_t to = w.wr_id >> 32; to < slot_.sent_to.size()) {
        slot_.sent_to[to].fetch_add(1);
      }
      slot_.sent.fetch_add(1);
    }
    if (consumed != 0 && post_receives(consumed) != Status::ok) {
      cq_failed_ = true;
      return Status::net_failed;
    }
    if (n < 32) return Status::ok;
  }
}

Status DcLeaderTransport::make_room(Dci& dci, std::uint32_t wrs) noexcept {
  if (wrs > kDciDepth) return Status::invalid_argument;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (unsigned i = 1; dci.free < wrs; ++i) {
    if (poll() != Status::ok || dci.failed) return Status::net_failed;
    // Slots come back with completions, which the HCA delivers within the
    // DCI's retry budget; without a relay the old limit still applies.
    if (!book_.on() && (i & 1023) == 0 &&
        Clock::now() - start >= std::chrono::milliseconds(opt_.timeout_ms)) {
      MLXA2A_LOG(Warn, "DC: no send queue space within %u ms", opt_.timeout_ms);
      return Status::timeout;
    }
    cpu_relax();
  }
  return Status::ok;
}

Status DcLeaderTransport::post_message(Peer& peer, const hier::Message& m) noexcept {
  const int par = m.parity & 1;
  const char* in = areas_.in[par];
  if (m.send < in || m.send + m.bytes > in + areas_.bytes ||
      m.remote_offset + m.bytes > peer.out_bytes || m.bytes > kPiece * kMaxPieces) {
    return Status::invalid_argument;
  }
  const auto* head = reinterpret_cast<const char*>(m.head_send);
  constexpr std::size_t kHead = sizeof(hier::Header);
  if (head && (head < in || head + kHead > in + areas_.bytes ||
               m.head_remote_offset + kHead > peer.out_bytes)) {
    return Status::invalid_argument;
  }
  const std::size_t pieces = m.bytes == 0 ? 1 : (m.bytes + kPiece - 1) / kPiece;
  const auto wrs = static_cast<std::uint32_t>(pieces + (head ? 1 : 0));
  const std::size_t k = peer.dci;
  Dci& d = dcis_[k];
  if (const Status st = make_room(d, wrs); st != Status::ok) return st;
  // Its polls may have failed the DCI and moved the partner (send_one
  // then posts where it is now).
  if (peer.dci != k || peer.relaying) return Status::net_failed;
  const std::uint64_t id = wr_id(k, peer.member, false, false);
  const std::uint64_t last_id = wr_id(k, peer.member, false, true);
  const std::uint32_t lkey = in_mr_[par]->lkey();
  const std::uint32_t imm = wire::imm(0, me_, par);
  ibv_wr_start(d.ex);
  // The header first: the DCI executes in order, so it is placed before the
  // data's write with immediate completes at the partner (as over RC).
  if (head) {
    add_write(d.ex, d.dv, peer.ah.get(), peer.dctn, peer.key, id, false, nullptr, peer.rkey[par],
              peer.out_addr[par] + m.head_remote_offset, lkey, head, kHead);
  }
  for (std::size_t at = 0, p = 0; p < pieces; ++p, at += kPiece) {
    const std::size_t len = m.bytes - at < kPiece ? m.bytes - at : kPiece;
    const bool last = p + 1 == pieces;
    add_write(d.ex, d.dv, peer.ah.get(), peer.dctn, peer.key, last ? last_id : id, last,
              last ? &imm : nullptr, peer.rkey[par], peer.out_addr[par] + m.remote_offset + at,
              lkey, m.send + at, len);
  }
  if (ibv_wr_complete(d.ex) != 0) {
    MLXA2A_LOG(Warn, "DC: posting a write to node %d failed", m.node);
    return Status::net_failed;
  }
  took(d, wrs);
  return Status::ok;
}

void DcLeaderTransport::retire_message(std::size_t k) noexcept {
  Dci& d = dcis_[k];
  if (d.count == 0) return;  // every message took its slots (took()): not reached
  d.free += d.groups[d.head];
  d.head = (d.head + 1) % d.groups.size();
  --d.count;
  if (d.failed) reset_when_idle(k);
}

void DcLeaderTransport::reset_when_idle(std::size_t k) noexcept {
  // Reset discards what is still queued without a completion: only once
  // every message on it has completed (in error) may it go back to RTS.
  if (dcis_[k].count == 0 && reset_dci(dcis_[k])) {
    MLXA2A_LOG(Info, "DC: DCI %zu is back in RTS", k);
  }
}

void DcLeaderTransport::took(Dci& d, std::uint32_t wrs) noexcept {
  d.free -= wrs;
  d.groups[(d.head + d.count) % d.groups.size()] = wrs;
  ++d.count;
}

bool DcLeaderTransport::post_alive(Peer& peer) noexcept {
  // A zero-length write needs no memory at either end (as RC's keep-alive).
  Dci& d = dcis_[peer.dci];
  ibv_wr_start(d.ex);
  add_write(d.ex, d.dv, peer.ah.get(), peer.dctn, peer.key,
            wr_id(peer.dci, peer.member, true, true), true, nullptr,
            peer.rkey[0], peer.out_addr[0], 0, nullptr, 0);
  if (ibv_wr_complete(d.ex) != 0) return false;
  took(d, 1);
  return true;
}

bool DcLeaderTransport::ping(std::string* why) noexcept {
  std::uint64_t want = slot_.alive;
  for (Peer& peer : peers_) {
    if (!peer.active) continue;
    if (make_room(dcis_[peer.dci], 1) != Status::ok || !post_alive(peer)) {
      *why = "the DC ping to leader " + std::to_string(peer.member) + " could not be posted";
      broken_ = true;
      return false;
    }
    ++want;
  }
  // Bounded by the HCA: each write completes or fails within the DCI's
  // retry budget (MLXA2A_NET_QP_TIMEOUT x MLXA2A_NET_RETRY_COUNT). No relay
  // yet: a failed completion fails poll().
  while (slot_.alive < want) {
    if (poll() != Status::ok) {
      *why = "a DC ping failed: the fabric does not carry a pair, or a DCT refused its key";
      broken_ = true;
      return false;
    }
    if (opt_.oversubscribed) sched_yield();
  }
  return true;
}

Status DcLeaderTransport::exchange(std::span<const hier::Message> messages) noexcept {
  if (const Status st = post(messages); st != Status::ok) return st;
  return complete();
}

Status DcLeaderTransport::post(std::span<const hier::Message> messages) noexcept {
  if (broken_) return Status::net_failed;
  pending_.clear();
  if (messages.empty()) return Status::ok;
  const int par = messages[0].parity & 1;
  for (const hier::Message& m : messages) {
    if (m.node < 0 || static_cast<std::size_t>(m.node) >= first_rank_.size() || m.gather ||
        (m.parity & 1) != par) {
      return fail(Status::invalid_argument);
    }
    const std::size_t r = static_cast<std::size_t>(first_rank_[static_cast<std::size_t>(m.node)] +
                                                   m.leader);
    // pending_ holds at most one entry per peer (reserved at creation).
    if (r >= peers_.size() || !peers_[r].active || pending_.size() == pending_.capacity()) {
      return fail(Status::invalid_argument);
    }
    Peer& peer = peers_[r];
    peer.msg = m;
    peer.relayed_now = false;
    peer.write_lost = false;
    ++peer.posted[par];
    pending_.push_back(&peer);
    if (const Status st = send_one(peer); st != Status::ok) return st;
  }
  expect_arrived_[par] += messages.size();
  expect_sent_ += messages.size();
  pending_parity_ = par;
  return Status::ok;
}

Status DcLeaderTransport::complete() noexcept {
  if (broken_) return Status::net_failed;
  if (pending_.empty()) return Status::ok;
  const int par = pending_parity_;
  if (book_.on()) {
    const Status st = book_.wait(par, expect_arrived_[par], expect_sent_, opt_, spin_);
    if (st == Status::ok) pending_.clear();
    return st;
  }
  // Without a relay (the MPI-free tests): any failure ends the call, and so
  // does MLXA2A_NET_TIMEOUT without an arrival.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (unsigned i = 1;; ++i) {
    if (poll() != Status::ok) return fail(Status::net_failed);
    if (slot_.arrived[par] >= expect_arrived_[par] && slot_.sent >= expect_sent_) {
      pending_.clear();
      return Status::ok;
    }
    if ((i & 255) != 0) {
      cpu_relax();
      continue;
    }
    if (opt_.idle) opt_.idle();
    if (opt_.oversubscribed) sched_yield();
    if (Clock::now() - start >= std::chrono::milliseconds(opt_.timeout_ms)) {
      MLXA2A_LOG(Warn, "DC: no arrival from a partner leader within %u ms", opt_.timeout_ms);
      return fail(Status::timeout);
    }
  }
}

}  // namespace mlxa2a::mlx5
