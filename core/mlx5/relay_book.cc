#include "core/mlx5/relay_book.h"

#include <atomic>
#include <cstring>

#include "core/log.h"
#include "core/mlx5/wait_pace.h"
#include "core/wait_cpu.h"

namespace mlxa2a::mlx5 {

namespace {

std::atomic<std::uint64_t> g_relayed{0};

}  // namespace

std::uint64_t RelayBook::relayed_count() noexcept {
  return g_relayed.load(std::memory_order_relaxed);
}

void RelayBook::start_relaying(RelayPeer& peer, const char* why) noexcept {
  peer.relaying = true;
  degraded_ = true;
  MLXA2A_LOG(Warn, "%s: the %s to leader %u failed (%s); its messages go through PMPI "
             "from now on", name_, path_, peer.member, why);
}

Status RelayBook::send(RelayPeer& peer, const char* data) noexcept {
  const hier::Message& m = peer.msg;
  const int par = m.parity & 1;
  hier::RelayNotice n;
  n.parity = static_cast<std::uint32_t>(par);
  n.seq = peer.posted[par];
  n.offset = m.remote_offset;
  n.bytes = m.bytes;
  if (m.head_send) {
    n.has_head = 1;
    n.head = *m.head_send;
    n.head_offset = m.head_remote_offset;
  }
  peer.relayed_now = true;
  degraded_ = true;
  g_relayed.fetch_add(1, std::memory_order_relaxed);
  return relay_->send(static_cast<int>(peer.member), n, data);
}

Status RelayBook::take_notices() noexcept {
  for (;;) {
    int member = -1;
    hier::RelayNotice n;
    bool got = false;
    if (const Status st = relay_->next(&member, &n, &got); st != Status::ok) return st;
    if (!got) return Status::ok;
    degraded_ = true;
    if (n.kind == hier::RelayNotice::kAbort) {
      MLXA2A_LOG(Warn, "%s: leader %d lost its completion queue or device; this call fails "
                 "with it", name_, member);
      return Status::net_failed;
    }
    // An arrival of the same message by RDMA completed before its sender
    // gave up on it (the CQE is written before the ACK that got lost):
    // count it first, so the relayed copy is recognised as a duplicate.
    host_.drain();
    const std::size_t at = static_cast<std::size_t>(member);
    const int par = static_cast<int>(n.parity & 1);
    if (member < 0 || at >= slot_.sent_to.size() || !host_.partner(at) || n.parity > 1 ||
        n.offset + n.bytes > areas_.bytes || n.offset + n.bytes < n.offset ||
        (n.has_head && n.head_offset + sizeof(hier::Header) > areas_.bytes)) {
      MLXA2A_LOG(Error, "relay: a notice from leader %d does not fit this team", member);
      return Status::net_failed;
    }
    std::atomic<std::uint64_t>& have = slot_.from[par][at];
    if (n.seq <= have) {  // its write landed after all
      if (const Status st = relay_->receive(member, nullptr, n.bytes); st != Status::ok) return st;
      continue;
    }
    if (n.seq != have + 1) {
      MLXA2A_LOG(Error, "relay: leader %d sent message %llu, expected %llu", member,
                 static_cast<unsigned long long>(n.seq),
                 static_cast<unsigned long long>(have + 1));
      return Status::net_failed;
    }
    char* out = areas_.out[par];
    if (n.has_head) std::memcpy(out + n.head_offset, &n.head, sizeof n.head);
    if (const Status st = relay_->receive(member, out + n.offset, n.bytes); st != Status::ok) {
      return st;
    }
    have.fetch_add(1);
    slot_.arrived[par].fetch_add(1);
    host_.relayed_in(at, par);
  }
}

void RelayBook::abort() noexcept {
  // Every partner hears it, whatever it already has from us: one still
  // waiting for us ends its call, one already done fails its next (it waits
  // for our next message and finds this notice), so every rank fails call
  // K or K+1 and containment's agreement completes - where without it a
  // partner would wait for our message without a limit.
  hier::RelayNotice n;
  n.kind = hier::RelayNotice::kAbort;
  for (std::size_t m = 0; m < slot_.sent_to.size(); ++m) {
    if (host_.partner(m)) (void)relay_->send(static_cast<int>(m), n, nullptr);
  }
}

bool RelayBook::settled(const RelayPeer& p, int par) const noexcept {
  if (slot_.from[par][p.member] < p.posted[par]) return false;
  return p.relayed_now || slot_.sent_to[p.member] >= p.rdma_posted;
}

Status RelayBook::wait(int par, std::uint64_t expect_arrived, std::uint64_t expect_sent,
                       const NetOptions& opt, hier::NetSpin& spin) noexcept {
  const core::wait_cpu::Scope accounted;  // MLXA2A_COLL_STATS: CPU spent waiting
  WaitPace pace(spin.budget_ns());
  const std::uint64_t interval_ns = std::uint64_t{opt.keepalive_ms} * 1'000'000;
  std::uint64_t alive_at = 0;
  for (unsigned i = 0;; ++i) {
    // A failed CQ or device loses completions for good: arrivals counted
    // nowhere cannot be told from arrivals that never came, so this is the
    // one failure that still ends the call (docs/hier.md).
    if (host_.poll_cq() != Status::ok) return host_.abort_pending(Status::net_failed);
    if (!degraded_) {
      if (slot_.arrived[par] >= expect_arrived && slot_.sent >= expect_sent) break;
      if (slot_.failed || host_.path_failed()) degraded_ = true;
    }
    if (degraded_) {
      // A message the relay cannot carry either (a zero-copy one without
      // CMA, an MPI error): the partners must not wait for it.
      if (const Status st = host_.relay_failed(); st != Status::ok) {
        return host_.abort_pending(st);
      }
      if (const Status st = take_notices(); st != Status::ok) return host_.fail(st);
      if (host_.settled()) break;
    }
    if (!pace.step(i) || (i & 63) != 0) continue;
    // About once a millisecond (or a nap): MPI progress for local peers,
    // events (a QP the HCA failed shows here long before its retries run
    // out), a partner's notice (its write failed while ours went fine), and
    // the keep-alives.
    host_.idle();
    if (!degraded_) {
      if (const Status st = take_notices(); st != Status::ok) return host_.fail(st);
    }
    if (const std::uint64_t now = pace.waited_ns(); now - alive_at >= interval_ns) {
      alive_at = now;
      host_.keepalive();
    }
  }
  spin.observe(pace.waited_ns());
  return Status::ok;
}

}  // namespace mlxa2a::mlx5
