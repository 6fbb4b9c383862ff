// What a one-sided leader transport keeps for its relay (hier::Relay), shared
// by RC (rdma_transport_relay.cc) and DC (dc_transport_relay.cc): the
// per-partner counts that make every message count exactly once, the
// notices that carry a message whose write could not, and the wait without
// a time limit (docs/hier.md, "Failure transparency").
//
// Contract
// * A transport owns one RelayBook, made with its Slot (per-member arrival
//   and completion counters its CQ poll fills: an immediate names its
//   sender, a wr_id the partner it went to, core/mlx5/endpoint_pool.h's
//   wire) and its StageAreas, and implements RelayHost for the steps only it
//   knows (polling its CQ, what failed, keep-alives).
// * Per partner it keeps a RelayPeer: messages posted per parity (the
//   relay's sequence numbers, and the arrivals a round expects: exchanges
//   are symmetric), how many of them went by RDMA, whether the partner's
//   path failed for good (relaying) and whether this round's message went
//   through the relay.
// * send(): this round's message to the partner through the relay (a notice
//   and its bytes), counted in relayed_count(). take_notices(): places what
//   partners relayed, after draining the CQ, dropping a copy whose write
//   landed after all. wait(): complete() of a transport with a relay.
// * Not thread-safe: one transport, one thread (the Slot's counters are
//   atomics for whichever thread polls the CQ).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/hier/net_spin.h"
#include "core/hier/relay.h"
#include "core/hier/transport.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/options.h"

namespace mlxa2a::mlx5 {

struct RelayPeer {
  std::uint32_t member = 0;  // its index among the members (Slot::from, sent_to)
  std::uint64_t posted[2] = {0, 0};  // messages to it per parity, any path
  // Of them written by RDMA, in the completions Slot::sent_to counts (RC:
  // K per message striped over K QPs, one per stripe).
  std::uint64_t rdma_posted = 0;
  bool relaying = false;             // its path failed: every message goes through the relay
  bool relayed_now = false;          // this round's message went through the relay
  hier::Message msg{};               // this round's message (relayed later if its write fails)
};

// The transport's side of wait() and take_notices().
class RelayHost {
 public:
  // Polls the CQ once (without waiting for another thread's poll); not ok:
  // the CQ or device failed (completions lost).
  virtual Status poll_cq() noexcept = 0;
  // Drains the CQ (waiting for another thread's poll to end), before a
  // notice is taken.
  virtual void drain() noexcept = 0;
  // Whether a pending partner's path failed (the round then ends by the
  // per-member counts).
  virtual bool path_failed() noexcept = 0;
  // Relays every pending message whose write will not complete now.
  virtual Status relay_failed() noexcept = 0;
  // Whether every pending message is settled (RelayBook::settled per partner).
  virtual bool settled() const noexcept = 0;
  // Whether `member` is one of this leader's partners.
  virtual bool partner(std::size_t member) const noexcept = 0;
  // About once a millisecond of waiting: events, MPI progress.
  virtual void idle() noexcept = 0;
  // A zero-length write to every pending partner not yet heard from.
  virtual void keepalive() noexcept = 0;
  // The CQ failed or a message cannot go through the relay either: every
  // partner hears it (RelayBook::abort) and the call fails with st.
  virtual Status abort_pending(Status st) noexcept = 0;
  // The transport is broken: st, and every later call fails.
  virtual Status fail(Status st) noexcept = 0;
  // A message from `member` was placed from the relay (take_notices): RC
  // forgets the stripes of it that landed (docs/hier-transports.md, "Stripes").
  virtual void relayed_in(std::size_t member, int parity) noexcept {
    (void)member;
    (void)parity;
  }

 protected:
  ~RelayHost() = default;
};

class RelayBook {
 public:
  // For logs: name ("RDMA", "DC") and what carries a partner's writes
  // ("queue pair", "DC path").
  RelayBook(RelayHost& host, Slot& slot, const hier::StageAreas& areas, const char* name,
            const char* path) noexcept
      : host_(host), slot_(slot), name_(name), path_(path), areas_(areas) {}
  void set_relay(std::unique_ptr<hier::Relay> relay) noexcept { relay_ = std::move(relay); }
  bool on() const noexcept { return relay_ != nullptr; }

  // A partner's path failed (`why`): its messages go through the relay from now on.
  void start_relaying(RelayPeer& peer, const char* why) noexcept;
  // This round's message to the partner through the relay; data: its bytes.
  [[nodiscard]] Status send(RelayPeer& peer, const char* data) noexcept;
  // Places what partners relayed (after draining the CQ: a write that landed
  // after all is counted first, its relayed copy dropped).
  [[nodiscard]] Status take_notices() noexcept;
  // Tells every partner (RelayHost::partner, among the Slot's members) that
  // this leader's transport failed beyond repair (kAbort).
  void abort() noexcept;
  // Whether the partner's message of this round and its own are in.
  bool settled(const RelayPeer& peer, int parity) const noexcept;
  // Something failed or a notice came: rounds end by the per-member counts.
  bool degraded() const noexcept { return degraded_; }
  void degrade() noexcept { degraded_ = true; }
  // complete(): until this round's messages (expect_arrived at `parity`)
  // are in and ours (expect_sent) are settled, by RDMA or the relay, with
  // no time limit; keep-alives every opt.keepalive_ms.
  [[nodiscard]] Status wait(int parity, std::uint64_t expect_arrived, std::uint64_t expect_sent,
                            const NetOptions& opt, hier::NetSpin& spin) noexcept;

  // Messages this process sent through relays (all transports), for stats.
  static std::uint64_t relayed_count() noexcept;

 private:
  RelayHost& host_;
  Slot& slot_;
  const char* name_;
  const char* path_;
  hier::StageAreas areas_;
  std::unique_ptr<hier::Relay> relay_;
  bool degraded_ = false;
};

}  // namespace mlxa2a::mlx5
