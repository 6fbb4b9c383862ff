#include "core/mlx5/rdma_transport.h"
#include "core/mlx5/wait_pace.h"

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

#include "core/arch.h"
#include "core/log.h"
#include "core/wait_cpu.h"

namespace mlxa2a::mlx5 {

namespace {

constexpr std::size_t kPiece = std::size_t{1} << 30;  // an SGE's length is 32 bits
constexpr int kMaxPieces = 8;                         // areas are far below 8 GiB

// The plain write of a message's hier::Header to its fixed place in the
// partner's out-area (core/hier/transport.h), chained before the data: RC
// executes a QP's WRs in order, so the data's write with immediate completes
// at the partner only after the header is placed. Unsignalled, like every WR
// but the data's last. false: the header lies outside the areas.
bool header_wr(const hier::Message& m, const char* in, std::size_t in_bytes, std::uint32_t lkey,
               std::uint64_t out_addr, std::uint32_t rkey, std::uint64_t out_bytes,
               std::uint32_t max_inline, ibv_sge* sge, ibv_send_wr* wr, ibv_send_wr* next) {
  const auto* head = reinterpret_cast<const char*>(m.head_send);
  constexpr std::size_t kLen = sizeof(hier::Header);
  if (head < in || head + kLen > in + in_bytes || m.head_remote_offset + kLen > out_bytes) {
    return false;
  }
  *sge = {reinterpret_cast<std::uintptr_t>(head), static_cast<std::uint32_t>(kLen), lkey};
  *wr = {};
  wr->wr_id = next->wr_id;
  wr->sg_list = sge;
  wr->num_sge = 1;
  wr->opcode = IBV_WR_RDMA_WRITE;
  wr->send_flags = kLen <= max_inline ? IBV_SEND_INLINE : 0;
  wr->wr.rdma.remote_addr = out_addr + m.head_remote_offset;
  wr->wr.rdma.rkey = rkey;
  wr->next = next;
  return true;
}

// Posts a message's chain of `wrs` WRs, whose send credits were taken. A
// failed post queued none of them (verbs: nothing from *bad on, and every
// provider validates the chain before its doorbell): the credits go back,
// and the endpoint is failed, since whatever failed it (a QP out of RTS, a
// full queue we did not account for) will fail the next post too.
bool post_chain(Endpoint& ep, ibv_send_wr* first, std::uint32_t wrs) {
  ibv_send_wr* bad = nullptr;
  if (Verbs::post_send(ep.qp->get(), first, &bad) == 0) return true;
  ep.untake_send(wrs);
  ep.owner->failed = true;  // the pair's
  return false;
}

}  // namespace

RdmaLeaderTransport::~RdmaLeaderTransport() {
  if (slot_id_ != 0) EndpointPool::release_slot(slot_id_);
}

Status RdmaLeaderTransport::fail(Status st) noexcept {
  broken_ = true;
  return st;
}

Status RdmaLeaderTransport::fail_pending(Status st) noexcept {
  // A pair that lost a message (an error, or no arrival in time) cannot be
  // trusted by anyone: every team sharing it falls back at its next post,
  // and the next set-up replaces it on both ends (docs/hier.md, "Errors").
  for (const Peer* p : pending_) p->ep->failed = true;
  return fail(st);
}

Status RdmaLeaderTransport::post(Peer& peer, const hier::Message& m) noexcept {
  const int par = m.parity & 1;
  const char* in = areas_.in[par];
  if (m.send < in || m.send + m.bytes > in + areas_.bytes ||
      m.remote_offset + m.bytes > peer.out_bytes || m.bytes > kPiece * kMaxPieces) {
    return Status::invalid_argument;
  }
  if (m.bytes >= peer.stripe_min) [[unlikely]] {
    return post_striped(peer, m);
  }
  return post_span(*peer.ep, peer, m, 0, m.bytes, 0, m.head_send != nullptr);
}

// The bytes [at, at + len) of message m on one QP of the pair (lane): one
// write with immediate per piece of at most kPiece, the last one signalled,
// after the header's write if `head`. stripe: 0, or the stripe bit of the
// immediate and wr_id (one of a striped message's stripes).
Status RdmaLeaderTransport::post_span(Endpoint& lane, const Peer& peer, const hier::Message& m,
                                      std::size_t at0, std::size_t len0, std::uint32_t stripe,
                                      bool head) noexcept {
  const int par = m.parity & 1;
  const char* in = areas_.in[par];
  ibv_sge sge[kMaxPieces];
  ibv_send_wr wr[kMaxPieces];
  int n = 0;
  const std::uint64_t id = wire::wr_id(slot_id_, peer.member, false);
  const std::uint32_t imm = htonl(wire::imm(peer.slot, me_, par) | stripe);
  // A message of 0 bytes (a check call's, core/hier/transport.h) is one
  // write with immediate of length 0: the partner counts its arrival as any.
  for (std::size_t at = 0; at == 0 || at < len0; at += kPiece, ++n) {
    const std::size_t len = len0 - at < kPiece ? len0 - at : kPiece;
    const bool last = at + len == len0;
    sge[n] = {reinterpret_cast<std::uintptr_t>(m.send + at0 + at), static_cast<std::uint32_t>(len),
              in_mr_[par]->lkey()};
    wr[n] = {};
    // Only a stripe's signalled WR has the stripe bit (a flushed
    // unsignalled one would otherwise count as its stripe's completion).
    wr[n].wr_id = last && stripe != 0 ? id | 1 : id;
    // No SGE for 0 bytes: a 0-length SGE means 2 GiB to some HCAs.
    wr[n].sg_list = len != 0 ? &sge[n] : nullptr;
    wr[n].num_sge = len != 0 ? 1 : 0;
    // Only the last piece carries the immediate (the arrival) and asks for
    // a completion: RC executes a QP's WRs in order, and polling a later
    // signalled completion retires the unsignalled ones before it.
    wr[n].opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr[n].send_flags = last ? IBV_SEND_SIGNALED : 0;
    if (len != 0 && len <= lane.qp->inline_bytes()) wr[n].send_flags |= IBV_SEND_INLINE;
    wr[n].imm_data = imm;
    wr[n].wr.rdma.remote_addr = peer.out_addr[par] + m.remote_offset + at0 + at;
    wr[n].wr.rdma.rkey = peer.rkey[par];
    if (n > 0) wr[n - 1].next = &wr[n];
  }
  ibv_send_wr* first = wr;
  ibv_sge head_sge;
  ibv_send_wr head_wr;
  if (head) {
    if (!header_wr(m, in, areas_.bytes, in_mr_[par]->lkey(), peer.out_addr[par], peer.rkey[par],
                   peer.out_bytes, lane.qp->inline_bytes(), &head_sge, &head_wr, wr)) {
      return Status::invalid_argument;
    }
    first = &head_wr;
  }
  const std::uint32_t wrs = static_cast<std::uint32_t>(n) + (head ? 1 : 0);
  if (!lane.take_send(wrs)) {
    if (const Status st = send_credits(lane, wrs); st != Status::ok) return st;
  }
  if (!post_chain(lane, first, wrs)) return Status::net_failed;
  // The header's write is not counted: writes_posted counts the data's.
  EndpointPool::count_writes(static_cast<std::uint64_t>(n), len0);
  return Status::ok;
}

Status RdmaLeaderTransport::post_striped(Peer& peer, const hier::Message& m) noexcept {
  // K contiguous stripes of one 64-byte-aligned length (the last takes the
  // rest, and may be empty: a write of 0 bytes, still an arrival), stripe s
  // on the pair's QP s; the header goes with stripe 0. Each stripe takes
  // its own QP's credits.
  const std::uint32_t k = peer.ep->stripes();
  const std::size_t each = ((m.bytes + k - 1) / k + 63) & ~std::size_t{63};
  peer.striped_id = peer.msg_id(m.parity & 1);
  for (std::uint32_t s = 0; s < k; ++s) {
    const std::size_t at = std::min<std::size_t>(s * each, m.bytes);
    const std::size_t len = s + 1 == k ? m.bytes - at : std::min(each, m.bytes - at);
    const Status st = post_span(peer.ep->lane(s), peer, m, at, len, wire::kStripeBit,
                                s == 0 && m.head_send != nullptr);
    if (st != Status::ok) return end_striped(peer, s, st);
    ++peer.stripes_sent;
  }
  return end_striped(peer, k, Status::ok);
}

Status RdmaLeaderTransport::end_striped(Peer& peer, std::uint32_t posted, Status st) noexcept {
  const std::uint32_t k = peer.ep->stripes();
  if (st != Status::ok) {
    // Stripes 0..posted-1 are on their way: the message is relayed once
    // they are done (post(), relay_failed()); sent_to never reaches its K,
    // which marks it undelivered.
    if (posted > 0) {
      peer.stripes_partial = true;
      peer.rdma_posted += k;
    }
    return st;
  }
  // The caller counts one signalled WR and one completion per message.
  peer.rdma_posted += k - 1;
  expect_sent_ += k - 1;
  EndpointPool::count_striped();
  return Status::ok;
}

Status RdmaLeaderTransport::send_credits(Endpoint& ep, std::uint32_t wrs) noexcept {
  if (wrs > ep.qp->send_depth()) return Status::invalid_argument;  // set-up rules it out
  // Other teams' messages fill the shared send queue: their completions,
  // polled here or by whichever thread polls, free it. The wait holds no
  // lock (docs/hier.md, "Threads"); credits are taken with it held.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (unsigned i = 1;; ++i) {
    pool_->mutex().unlock();  // held by our caller (post, ping), which gets it back held
    const Status st = pool_->try_poll();
    cpu_relax();
    pool_->mutex().lock();
    if (st != Status::ok || ep.owner->failed) return Status::net_failed;
    if (ep.take_send(wrs)) return Status::ok;
    if ((i & 1023) == 0) {
      pool_->check_events();
      // Credits come back with completions, which the HCA delivers within
      // its retry budget; without a relay the old limit still applies.
      if (!book_.on() && Clock::now() - start >= std::chrono::milliseconds(opt_.timeout_ms)) {
        MLXA2A_LOG(Warn, "RDMA: no send queue space within %u ms", opt_.timeout_ms);
        return Status::timeout;
      }
    }
  }
}

std::uint32_t RdmaLeaderTransport::gather_sge() const noexcept {
  std::uint32_t n = 0;
  for (const Peer& p : peers_) {
    if (p.ep && (n == 0 || p.ep->qp->send_sge() < n)) n = p.ep->qp->send_sge();
  }
  return n == 0 ? 1 : n;
}

Status RdmaLeaderTransport::post_gather(Peer& peer, const hier::Message& m) noexcept {
  const hier::Gather& g = *m.gather;
  const int par = m.parity & 1;
  const char* in = areas_.in[par];
  const std::size_t row = g.dest_ranks.size() * g.chunk;  // one source's share of the message
  if (m.bytes == 0 || m.bytes != g.sources.size() * row || m.send < in ||
      m.send + m.bytes > in + areas_.bytes || m.remote_offset + m.bytes > peer.out_bytes) {
    return Status::invalid_argument;
  }
  try {
    sges_.clear();
    for (std::size_t a = 0; a < g.sources.size(); ++a) {
      const hier::GatherSource& src = g.sources[a];
      if (src.staged) {  // its row was copied into the section as usual
        sges_.push_back({reinterpret_cast<std::uintptr_t>(m.send + a * row),
                         static_cast<std::uint32_t>(row), in_mr_[par]->lkey()});
        continue;
      }
      gather_message({&src, 1}, g.dest_ranks, g.bytes_per_peer, g.offset, g.chunk, &one_, a);
      sges_.insert(sges_.end(), one_.begin(), one_.end());
    }
  } catch (...) {  // allocation only
    return Status::net_failed;
  }
  if (m.bytes >= peer.stripe_min) return post_gather_striped(peer, m);
  return post_sges(*peer.ep, peer, m, sges_, 0, m.bytes, 0, m.head_send != nullptr);
}

Status RdmaLeaderTransport::post_gather_striped(Peer& peer, const hier::Message& m) noexcept {
  // As post_striped: stripe s is the bytes [s * each, ...) of the message,
  // here the part of the gather's SGE list that covers them (an SGE on a
  // boundary is cut in two).
  const std::uint32_t k = peer.ep->stripes();
  const std::size_t each = ((m.bytes + k - 1) / k + 63) & ~std::size_t{63};
  peer.striped_id = peer.msg_id(m.parity & 1);
  std::size_t i = 0, used = 0;  // the next byte: SGE i, `used` bytes into it
  for (std::uint32_t s = 0; s < k; ++s) {
    const std::size_t at = std::min<std::size_t>(s * each, m.bytes);
    const std::size_t len = s + 1 == k ? m.bytes - at : std::min(each, m.bytes - at);
    Status st = Status::ok;
    try {
      stripe_sges_.clear();
      for (std::size_t need = len; need > 0;) {
        const ibv_sge& e = sges_[i];
        const std::size_t take = std::min<std::size_t>(e.length - used, need);
        stripe_sges_.push_back({e.addr + used, static_cast<std::uint32_t>(take), e.lkey});
        need -= take;
        used += take;
        if (used == e.length) {
          ++i;
          used = 0;
        }
      }
    } catch (...) {  // allocation only
      st = Status::net_failed;
    }
    if (st == Status::ok) {
      st = post_sges(peer.ep->lane(s), peer, m, stripe_sges_, at, len, wire::kStripeBit,
                     s == 0 && m.head_send != nullptr);
    }
    if (st != Status::ok) return end_striped(peer, s, st);
    ++peer.stripes_sent;
  }
  return end_striped(peer, k, Status::ok);
}

Status RdmaLeaderTransport::post_sges(Endpoint& lane, const Peer& peer, const hier::Message& m,
                                      std::span<ibv_sge> sges, std::size_t at0, std::size_t len0,
                                      std::uint32_t stripe, bool head) noexcept {
  const int par = m.parity & 1;
  const char* in = areas_.in[par];
  try {
    split_wrs(sges, lane.qp->send_sge(), kPiece, &spans_);
    if (spans_.size() > kMaxGatherWrs) return Status::invalid_argument;  // set-up rules it out
    if (spans_.empty()) spans_.push_back({});  // an empty stripe: a write of 0 bytes
    wrs_.assign(spans_.size(), ibv_send_wr{});
  } catch (...) {  // allocation only
    return Status::net_failed;
  }
  const std::uint64_t id = wire::wr_id(slot_id_, peer.member, false);
  for (std::size_t w = 0; w < spans_.size(); ++w) {
    const bool last = w + 1 == spans_.size();
    ibv_send_wr& wr = wrs_[w];
    wr.wr_id = last && stripe != 0 ? id | 1 : id;  // as post_span()
    wr.sg_list = spans_[w].num_sge != 0 ? &sges[spans_[w].first_sge] : nullptr;
    wr.num_sge = static_cast<int>(spans_[w].num_sge);
    // As post(): the last WR carries the arrival and the one completion.
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    wr.imm_data = htonl(wire::imm(peer.slot, me_, par) | stripe);
    wr.wr.rdma.remote_addr = peer.out_addr[par] + m.remote_offset + at0 + spans_[w].offset;
    wr.wr.rdma.rkey = peer.rkey[par];
    wr.next = last ? nullptr : &wrs_[w + 1];
  }
  ibv_send_wr* first = wrs_.data();
  ibv_sge head_sge;
  ibv_send_wr head_wr;
  if (head) {
    if (!header_wr(m, in, areas_.bytes, in_mr_[par]->lkey(), peer.out_addr[par], peer.rkey[par],
                   peer.out_bytes, lane.qp->inline_bytes(), &head_sge, &head_wr, first)) {
      return Status::invalid_argument;
    }
    first = &head_wr;
  }
  const std::uint32_t wrs = static_cast<std::uint32_t>(spans_.size()) + (head ? 1 : 0);
  if (!lane.take_send(wrs)) {
    if (const Status st = send_credits(lane, wrs); st != Status::ok) return st;
  }
  if (!post_chain(lane, first, wrs)) return Status::net_failed;
  EndpointPool::count_writes(spans_.size(), len0);
  return Status::ok;
}

Status RdmaLeaderTransport::exchange(std::span<const hier::Message> messages) noexcept {
  if (const Status st = post(messages); st != Status::ok) return st;
  return complete();
}

Status RdmaLeaderTransport::post(std::span<const hier::Message> messages) noexcept {
  if (broken_) return Status::net_failed;
  pending_.clear();
  if (messages.empty()) return Status::ok;
  const int par = messages[0].parity & 1;
  std::unique_lock<std::mutex> lock(pool_->mutex());
  for (const hier::Message& m : messages) {
    if (m.node < 0 || static_cast<std::size_t>(m.node) >= first_rank_.size()) {
      return fail(Status::invalid_argument);
    }
    const std::size_t r = static_cast<std::size_t>(first_rank_[static_cast<std::size_t>(m.node)] +
                                                   m.leader);
    // pending_ holds at most one entry per peer (reserved at creation).
    if (r >= peers_.size() || !peers_[r].ep || (m.parity & 1) != par ||
        pending_.size() == pending_.capacity()) {
      return fail(Status::invalid_argument);
    }
    Peer& peer = peers_[r];
    peer.msg = m;
    peer.relayed_now = false;
    ++peer.posted[par];
    pending_.push_back(&peer);
    if (!peer.relaying && peer.ep->failed) {
      // In error, or discarded and replaced by a later set-up (another
      // team's): without a relay this team stops here and falls back.
      if (!book_.on()) {
        MLXA2A_LOG(Warn, "RDMA: the queue pair to node %d failed; the team falls back", m.node);
        return fail(Status::net_failed);
      }
      start_relaying(peer);
    }
    if (!peer.relaying) {
      const Status st = m.gather ? post_gather(peer, m) : post(peer, m);
      if (st == Status::ok) {
        ++peer.rdma_posted;  // a striped message's other K - 1: post_striped
        continue;
      }
      MLXA2A_LOG(Warn, "RDMA: posting a write to node %d failed", m.node);
      if (!book_.on() || st == Status::invalid_argument) return fail(st);
      peer.ep->failed = true;
      start_relaying(peer);
      // Some of its stripes are on their way: relayed once they are done
      // (relay_failed), so that none lands after the relayed copy.
      if (peer.stripes_partial) {
        peer.stripes_partial = false;
        continue;
      }
    }
    if (const Status st = relay_message(peer); st != Status::ok) return abort_pending(st);
  }
  expect_arrived_[par] += messages.size();
  expect_sent_ += messages.size();
  pending_parity_ = par;
  return Status::ok;
}

Status RdmaLeaderTransport::complete() noexcept {
  if (broken_) return Status::net_failed;
  if (pending_.empty()) return Status::ok;
  // No lock is held while waiting (docs/hier.md, "Threads"): the CQ is
  // polled by whichever waiting thread gets the poll token, and our Slot's
  // counters are atomics.
  const EndpointPool::Waiter waiting;
  if (book_.on()) return complete_relayed();
  const int par = pending_parity_;
  // Arrivals for the other parity may come in meanwhile (a partner one round
  // ahead); they are counted in their own counter (docs/hier.md).
  // Without a relay (the MPI-free tests): any failure ends the call, and so
  // does MLXA2A_NET_TIMEOUT without an arrival.
  const core::wait_cpu::Scope accounted;  // MLXA2A_COLL_STATS: CPU spent waiting
  WaitPace pace(spin_.budget_ns());
  const std::uint64_t timeout_ns = std::uint64_t{opt_.timeout_ms} * 1'000'000;
  for (unsigned i = 0;; ++i) {
    if (pool_->try_poll() != Status::ok || slot_.failed) return fail_pending(Status::net_failed);
    if (slot_.arrived[par] >= expect_arrived_[par] && slot_.sent >= expect_sent_) {
      spin_.observe(pace.waited_ns());
      pending_.clear();
      return Status::ok;
    }
    for (const Peer* p : pending_) {
      if (p->ep->failed) return fail_pending(Status::net_failed);
    }
    if (!pace.step(i) || (i & 63) != 0) continue;
    if (opt_.idle) opt_.idle();
    if (pace.waited_ns() >= timeout_ns) {
      MLXA2A_LOG(Warn, "RDMA: no arrival from a partner leader within %u ms", opt_.timeout_ms);
      return fail_pending(Status::timeout);
    }
    // A port that went down or a QP the HCA failed shows here long before
    // the retries run out; the endpoints it names are failed (above).
    pool_->check_events_now();
  }
}

}  // namespace mlxa2a::mlx5
