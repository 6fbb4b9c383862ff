// RdmaLeaderTransport's failure transparency (docs/hier.md, "Failure
// transparency"): its side of the wait without a time limit (relay_book.h),
// keep-alives, and the messages that go through the relay when RDMA cannot
// carry them.
#include <sched.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

#include "core/arch.h"
#include "core/log.h"
#include "core/mlx5/rdma_transport.h"
#include "core/mlx5/wait_pace.h"
#include "core/wait_cpu.h"

namespace mlxa2a::mlx5 {

void RdmaLeaderTransport::start_relaying(Peer& peer) noexcept {
  book_.start_relaying(
      peer, *EndpointPool::last_event() ? EndpointPool::last_event() : "write failed");
}

bool RdmaLeaderTransport::pack_gather(const hier::Message& m) noexcept {
  // The bytes the gather's SGEs name, in their order (post_gather), read
  // from the ranks' buffers by CMA (the shm engine's own single copy; the
  // node's ranks wait in the call, their buffers unchanged).
  const hier::Gather& g = *m.gather;
  const std::size_t row = g.dest_ranks.size() * g.chunk;
  try {
    packed_.resize(m.bytes);
    std::size_t at = 0;
    for (std::size_t a = 0; a < g.sources.size(); ++a) {
      const hier::GatherSource& src = g.sources[a];
      if (src.staged) {  // its row was copied into the section as usual
        std::memcpy(packed_.data() + at, m.send + a * row, row);
        at += row;
        continue;
      }
      gather_message({&src, 1}, g.dest_ranks, g.bytes_per_peer, g.offset, g.chunk, &one_, a);
      for (const ibv_sge& e : one_) {
        if (at + e.length > packed_.size()) return false;
        iovec local{packed_.data() + at, e.length};
        iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(e.addr)), e.length};
        if (src.pid == getpid()) {
          std::memcpy(local.iov_base, remote.iov_base, e.length);
        } else if (::process_vm_readv(src.pid, &local, 1, &remote, 1, 0) !=
                   static_cast<ssize_t>(e.length)) {
          MLXA2A_LOG(Error, "relay: reading rank pid %d's send buffer failed: a zero-copy "
                     "message cannot go through PMPI", static_cast<int>(src.pid));
          return false;
        }
        at += e.length;
      }
    }
    return at == m.bytes;
  } catch (...) {  // allocation only
    return false;
  }
}

Status RdmaLeaderTransport::relay_message(Peer& peer) noexcept {
  const hier::Message& m = peer.msg;
  const char* data = m.send;
  if (m.gather && m.bytes != 0) {
    if (!pack_gather(m)) return Status::net_failed;
    data = packed_.data();
  }
  return book_.send(peer, data);
}

Status RdmaLeaderTransport::relay_failed() noexcept {
  for (const Peer* p : pending_) {
    Peer& peer = const_cast<Peer&>(*p);  // pending_ points into peers_, which we own
    if (peer.relayed_now || !peer.ep->failed) continue;
    if (!peer.relaying) start_relaying(peer);
    // Its write completed before the failure: the partner has it.
    if (slot_.sent_to[peer.member] >= peer.rdma_posted) continue;
    // A striped message goes again only once each of its stripes posted is
    // done (landed, failed or flushed: healthy QPs of the pair still
    // deliver theirs), so that the partner has counted every stripe that
    // will ever arrive before it reads the relayed copy (take_notices).
    const bool striped = peer.striped_id == peer.msg_id(pending_parity_);
    if (striped && slot_.stripes_done[peer.member] < peer.stripes_sent) continue;
    // The write will not complete now (flushed, or its QP retired): its
    // completion is no longer waited for, and the message goes again.
    peer.rdma_posted -= striped ? peer.ep->stripes() : 1;
    if (const Status st = relay_message(peer); st != Status::ok) return st;
  }
  return Status::ok;
}

void RdmaLeaderTransport::relayed_in(std::size_t member, int parity) noexcept {
  // The stripes of a relayed message that landed (all that ever will: its
  // sender relays it only once every stripe is done, and take_notices
  // drained the CQ first) are not counted towards the member's next message.
  const std::uint64_t k = peers_[member].ep->stripes();
  std::atomic<std::uint64_t>& got = slot_.stripes_from[parity][member];
  if (const std::uint64_t part = got % k; part != 0) got.fetch_add(k - part);
}

Status RdmaLeaderTransport::abort_pending(Status st) noexcept {
  book_.abort();
  return fail_pending(st);
}

bool RdmaLeaderTransport::settled() const noexcept {
  for (const Peer* p : pending_) {
    if (!book_.settled(*p, pending_parity_)) return false;
  }
  return true;
}

bool RdmaLeaderTransport::path_failed() noexcept {
  for (const Peer* p : pending_) {
    if (p->ep->failed) return true;
  }
  return false;
}

void RdmaLeaderTransport::idle() noexcept {
  if (opt_.idle) opt_.idle();
  pool_->check_events_now();
}

bool RdmaLeaderTransport::post_alive(const Peer& peer, Endpoint& lane) noexcept {
  // A zero-length write needs no memory at either end; it completes once
  // the partner's HCA acknowledges it, or fails when its retries run out
  // (the partner's process is gone and its QP with it).
  ibv_send_wr wr{};
  wr.wr_id = wire::wr_id(slot_id_, peer.member, true);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer.out_addr[0];
  wr.wr.rdma.rkey = peer.rkey[0];
  ibv_send_wr* bad = nullptr;
  if (Verbs::post_send(lane.qp->get(), &wr, &bad) == 0) return true;
  lane.untake_send(1);
  peer.ep->failed = true;
  return false;
}

void RdmaLeaderTransport::keepalive() noexcept {
  const int par = pending_parity_;
  std::lock_guard<std::mutex> lock(pool_->mutex());  // credits and post together
  for (const Peer* p : pending_) {
    Endpoint& ep = *p->ep;
    if (ep.failed || slot_.from[par][p->member] >= p->posted[par] || !ep.take_send(1)) continue;
    (void)post_alive(*p, ep);  // QP 0: a dead partner fails every QP of the pair
  }
}

bool RdmaLeaderTransport::ping(std::string* why) noexcept {
  std::unique_lock<std::mutex> lock(pool_->mutex());
  std::uint64_t want = slot_.alive;
  for (const Peer& p : peers_) {
    if (!p.ep) continue;
    // Every QP of the pair: on RoCE each stripe takes its own path.
    for (std::uint32_t s = 0; s < p.ep->stripes(); ++s) {
      Endpoint& lane = p.ep->lane(s);
      if (!p.ep->failed && !lane.take_send(1) && send_credits(lane, 1) != Status::ok) {
        p.ep->failed = true;
      }
      if (p.ep->failed || !post_alive(p, lane)) {
        *why = "the ping to leader " + std::to_string(p.member) + " could not be posted";
        return false;
      }
      ++want;
    }
  }
  lock.unlock();  // the wait holds no lock (docs/hier.md, "Threads")
  // Bounded by the HCA: each write completes or fails within the QP's retry
  // budget (MLXA2A_NET_QP_TIMEOUT x MLXA2A_NET_RETRY_COUNT).
  for (unsigned i = 1;; ++i) {
    if (pool_->try_poll() != Status::ok) {
      *why = "the completion queue failed during the set-up's pings";
      return false;
    }
    if (slot_.alive >= want) return true;
    for (const Peer& p : peers_) {
      if (p.ep && p.ep->failed) {
        *why = "the ping to leader " + std::to_string(p.member) + " failed (" +
               (*EndpointPool::last_event() ? EndpointPool::last_event() : "write failed") +
               "): the fabric does not carry the pair";
        return false;
      }
    }
    if ((i & 63) == 0) {
      sched_yield();
      if (opt_.idle) opt_.idle();
      pool_->check_events_now();
    } else {
      cpu_relax();
    }
  }
}

Status RdmaLeaderTransport::complete_relayed() noexcept {
  const int par = pending_parity_;
  const Status st = book_.wait(par, expect_arrived_[par], expect_sent_, opt_, spin_);
  if (st == Status::ok) pending_.clear();
  return st;
}

}  // namespace mlxa2a::mlx5
