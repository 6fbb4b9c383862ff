// DcLeaderTransport's failure transparency (docs/hier.md, "Failure
// transparency"; docs/hier-transports.md, "DC"): its side of the relayed
// wait (relay_book.h), failed DCIs, keep-alives, and the messages that go
// through the relay when a DC write cannot carry them.
#include "core/log.h"
#include "core/mlx5/dc_transport.h"
#include "core/mlx5/endpoint_pool.h"

namespace mlxa2a::mlx5 {

Status DcLeaderTransport::send_one(Peer& peer) noexcept {
  while (!peer.relaying) {
    const std::size_t k = peer.dci;
    const Status st = post_message(peer, peer.msg);
    if (st == Status::ok) {
      ++peer.rdma_posted;
      EndpointPool::count_writes(1, peer.msg.bytes);
      return Status::ok;
    }
    if (!book_.on() || st == Status::invalid_argument) return fail(st);
    if (cq_failed_) return abort_pending(Status::net_failed);
    // The DCI failed while we waited for its room: the partner moved to a
    // live DCI (or relays); else the post itself failed on it.
    if (peer.dci != k || dcis_[k].failed) continue;
    retire_dci(k, static_cast<long>(peer.member), "posting a write failed");
  }
  if (const Status st = book_.send(peer, peer.msg.send); st != Status::ok) {
    return abort_pending(st);
  }
  return Status::ok;
}

void DcLeaderTransport::count_error(const ibv_wc& w) noexcept {
  const std::size_t k = dci_of(w.wr_id);
  const std::size_t member = w.wr_id >> 32;
  if (k >= dcis_.size() || member >= peers_.size() || !peers_[member].active) return;
  book_.degrade();
  if (w.status == IBV_WC_WR_FLUSH_ERR) {
    if (!dcis_[k].failed) retire_dci(k, -1, "flushed");
  } else {
    const Verbs& v = dev_->verbs();
    retire_dci(k, static_cast<long>(member),
               v.wc_status_str ? v.wc_status_str(w.status) : "error");
  }
  // Every WR of a failed DCI completes, in error, the unsignalled too; the
  // last one's completion (exactly one per message, after the others) says
  // the message is lost - not an earlier WR's, which may come while the
  // round is already settled by the relay and the next message in flight.
  if (!last_of(w.wr_id)) return;
  if ((w.wr_id & 2) == 0) peers_[member].write_lost = true;
  retire_message(k);
}

void DcLeaderTransport::retire_dci(std::size_t k, long culprit, const char* why) noexcept {
  if (culprit >= 0) {
    Peer& c = peers_[static_cast<std::size_t>(culprit)];
    if (!c.relaying) book_.start_relaying(c, why);
  }
  Dci& d = dcis_[k];
  if (d.failed) return;
  // In the error state every later WR is flushed; it is not posted on
  // until every message in flight on it has completed (reset_when_idle).
  d.failed = true;
  book_.degrade();
  std::size_t live = dcis_.size();
  for (std::size_t j = 0; j < dcis_.size(); ++j) {
    if (!dcis_[j].failed) {
      live = j;
      break;
    }
  }
  MLXA2A_LOG(Warn, "DC: DCI %zu failed (%s); its other partners %s", k, why,
             live < dcis_.size() ? "move to another DCI" : "relay: no DCI is left");
  // A partner's messages stay in order: nothing more completes on the old
  // DCI, and its next message by RDMA goes only once the partner has the
  // relayed one (rounds of one parity alternate with the partner's).
  for (Peer& p : peers_) {
    if (!p.active || p.dci != k || p.relaying) continue;
    if (live < dcis_.size()) {
      p.dci = live;
    } else {
      book_.start_relaying(p, "every DCI failed");
    }
  }
  reset_when_idle(k);  // nothing in flight (a failed post): back to RTS at once
}

Status DcLeaderTransport::relay_failed() noexcept {
  for (Peer* p : pending_) {
    if (p->relayed_now || !p->write_lost) continue;
    p->write_lost = false;
    // Its write completed before the failure: the partner has it.
    if (slot_.sent_to[p->member] >= p->rdma_posted) continue;
    // The write will not complete now (failed or flushed): its completion
    // is no longer waited for, and the message goes again.
    --p->rdma_posted;
    if (const Status st = book_.send(*p, p->msg.send); st != Status::ok) return st;
  }
  return Status::ok;
}

bool DcLeaderTransport::settled() const noexcept {
  for (const Peer* p : pending_) {
    if (!book_.settled(*p, pending_parity_)) return false;
  }
  return true;
}

void DcLeaderTransport::idle() noexcept {
  if (opt_.idle) opt_.idle();
  // A CQ overrun or a fatal device shows only as an async event: lost
  // completions would otherwise be waited for without a limit.
  pool_->check_events_now();
}

void DcLeaderTransport::keepalive() noexcept {
  // As RC's: a partner that is gone fails its DCI's write when the retries
  // run out, and its messages go through the relay.
  const int par = pending_parity_;
  for (Peer* p : pending_) {
    const Dci& d = dcis_[p->dci];
    if (p->relaying || d.failed || d.free < 1 || slot_.from[par][p->member] >= p->posted[par]) {
      continue;
    }
    if (!post_alive(*p)) retire_dci(p->dci, static_cast<long>(p->member), "a keep-alive's post failed");
  }
}

Status DcLeaderTransport::abort_pending(Status st) noexcept {
  book_.abort();
  return fail(st);
}

}  // namespace mlxa2a::mlx5
