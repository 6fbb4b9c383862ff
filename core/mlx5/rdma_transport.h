// The leaders' exchange over RDMA: one RDMA write with immediate per remote
// node per round, straight from this node's in-area into the partner
// leader's registered out-area at the receiver's offset (docs/hier.md,
// "The RDMA exchange"). Set-up in rdma_setup.cc, the data path in
// rdma_transport.cc.
//
// Contract
// * create() is collective over boot's members, which must be exactly the
//   team's leaders ordered by node, then leader index (leader j of node m is
//   member first_rank[m] + j). It always makes the same allgathers on every
//   member, whatever fails locally (link layers, cards, queue pairs, outcome — the last
//   also keeps anyone from writing before its partners are in RTR — and,
//   before the outcome, a repair round when agree_repair() says so from the
//   queue pairs every member saw, link_rule.h), and reports failure as a Status
//   (*why says what); the caller must agree on the outcome across the team
//   (core/mpi/team.cc: one allreduce) and fall back together. peers: the
//   members this leader exchanges with (symmetric: each of them lists us).
//   *over_budget (if given): RC would take some leader past its QP budget
//   (core/mlx5/qp_budget.h), alike on every member - the caller may then
//   set up DC instead (core/mlx5/dc_transport.h).
// * The stage's areas are registered here (in-areas for local reads,
//   out-areas for remote writes) and stay registered for the transport's
//   life; the queue pairs belong to the EndpointPool and are shared with
//   other transports pairing the same processes.
// * exchange(): as hier::LeaderTransport. With a relay (set_relay(), the
//   engine's in core/mpi) a failed write, post or queue pair never fails the
//   exchange: the message goes through the relay instead, and so does every
//   later one to that partner; the partner takes it from there, counted
//   once (docs/hier.md, "Failure transparency"). A partner is waited for
//   without a limit; every NetOptions::keepalive_ms of waiting a zero-length
//   write goes to each partner still awaited, so a dead peer's queue pair
//   fails (retries out) and its messages too go through the relay. Without
//   a relay (the MPI-free tests): Status::timeout when an expected arrival is
//   not seen within NetOptions::timeout_ms, net_failed on a failed post or
//   completion; the transport is then broken and every later exchange fails
//   at once. A failed endpoint is retired either way (Endpoint::failed):
//   other transports sharing it relay (or fail) at their next post, a later
//   set-up makes a new one.
// * Not thread-safe per instance; instances in different threads share the
//   pool: posts take its mutex, waits hold no lock and poll through its
//   poll token (docs/hier.md, "Threads"). Destruction is local.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "core/hier/net_spin.h"
#include "core/hier/relay.h"
#include "core/hier/transport.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/gather.h"
#include "core/mlx5/link_rule.h"
#include "core/mlx5/options.h"
#include "core/mlx5/relay_book.h"

namespace mlxa2a::mlx5 {

class RdmaLeaderTransport final : public hier::LeaderTransport, private RelayHost {
 public:
  static Status create(GroupBootstrap& boot, const hier::StageAreas& areas,
                       std::span<const int> first_rank, std::span<const int> peers,
                       const NetOptions& opt, std::unique_ptr<RdmaLeaderTransport>* out,
                       std::string* why, bool* over_budget = nullptr) noexcept;
  ~RdmaLeaderTransport() override;
  RdmaLeaderTransport(const RdmaLeaderTransport&) = delete;
  RdmaLeaderTransport& operator=(const RdmaLeaderTransport&) = delete;

  Status exchange(std::span<const hier::Message> messages) noexcept override;
  // Split (pipelined rounds): post() posts every write and returns; complete()
  // polls until this post's arrivals and write completions are in.
  Status post(std::span<const hier::Message> messages) noexcept override;
  Status complete() noexcept override;
  const char* name() const noexcept override { return "rdma"; }
  // Zero-copy messages (hier::Gather): SGE lists over the ranks' buffers,
  // split into at most kMaxGatherWrs WRs of gather_sge() SGEs each.
  bool gathers() const noexcept override { return true; }
  // The fewest SGEs per WR any of this transport's queue pairs was granted.
  std::uint32_t gather_sge() const noexcept;
  // Bound on a message's WRs: they must fit the send queue at once (the
  // unsignalled ones are retired only by the last, signalled one). Teams
  // sharing the QP take turns through its send credits (send_credits()).
  // (one WR of the send queue goes to the message's header, core/hier/transport.h)
  static constexpr std::size_t kMaxGatherWrs = EndpointPool::kSendDepth - 1;
  // QPs this transport's set-up created (0 when every pair was connected already).
  int qps_created() const { return qps_created_; }
  // Bytes this leader's set-up collectives moved (sent + received): linear in
  // the number of leaders (each pair's links go pairwise, an alltoall).
  std::size_t setup_bytes() const { return setup_bytes_; }
  // Set-up's last step, after create() on every leader (collective only in
  // that partners ping each other): a zero-length write to every partner,
  // waited for. A pair the fabric cannot carry (a crossed rail, another
  // subnet, a dead link) fails here within the QP's retry budget, before
  // the team agrees on RDMA, instead of in a user's call. false: *why says
  // which partner.
  bool ping(std::string* why) noexcept;
  // The second path for messages RDMA cannot carry (hier::Relay); set once,
  // before the first exchange, on every leader of the team alike.
  bool set_relay(std::unique_ptr<hier::Relay>& relay) noexcept override {
    book_.set_relay(std::move(relay));
    return true;
  }

 private:
  // The relay's per-partner counts (RelayPeer; relaying: its endpoint failed).
  struct Peer : RelayPeer {
    std::shared_ptr<Endpoint> ep;  // shared: a discarded one stays valid, marked failed
    std::uint64_t out_addr[2] = {0, 0};
    std::uint32_t rkey[2] = {0, 0};
    std::uint64_t out_bytes = 0;
    std::uint32_t slot = 0;  // its slot: the immediate names it
    // Stripes (post_striped): messages from this many bytes are striped
    // (never with one QP); the last striped message (msg_id()); stripes
    // posted to it (Slot::stripes_done counts them done); whether the last
    // post failed after some of its stripes were posted. rdma_posted
    // (RelayPeer) counts signalled WRs: K per striped message, as sent_to.
    std::uint64_t stripe_min = UINT64_MAX;
    std::uint64_t striped_id = 0;
    std::uint64_t stripes_sent = 0;
    bool stripes_partial = false;
    // The message of the given parity posted last (posted[par] and parity).
    std::uint64_t msg_id(int par) const {
      return posted[par] << 1 | static_cast<std::uint64_t>(par);
    }
  };
  RdmaLeaderTransport(EndpointPool* pool, const hier::StageAreas& areas, const NetOptions& opt)
      : pool_(pool), areas_(areas), opt_(opt), spin_(opt.oversubscribed),
        book_(*this, slot_, areas, "RDMA", "queue pair") {}
  // One message; the pool mutex held (dropped while waiting for send credits).
  Status post(Peer& peer, const hier::Message& m) noexcept;
  // Part of it on one QP of the pair (rdma_transport.cc).
  [[gnu::always_inline]] inline Status post_span(Endpoint& lane, const Peer& peer,
                                                 const hier::Message& m, std::size_t at,
                                                 std::size_t len, std::uint32_t stripe,
                                                 bool head) noexcept;
  // A message of at least NetOptions::stripe_min to a pair with K QPs: in K
  // stripes (docs/hier-transports.md, "Stripes").
  [[gnu::noinline]] Status post_striped(Peer& peer, const hier::Message& m) noexcept;
  struct Setup;  // create()'s steps and what they hand on (rdma_setup.cc)
  // Set-up: what our end does with the pair to process `id` once both ends'
  // links are known (link_rule.h). Not ok: this team cannot use it (*why
  // says why); Status::contended where a set-up tried again converges (the
  // pair was another team's, or both ends are made anew). Pool mutex held.
  Status settle(const ProcessId& id, const PortAddress& addr, const Link& m, const Link& r,
              Peer* peer, std::string* why) noexcept;
  // The repair round's first half: an Existing end is replaced by a new QP
  // (*link says New, or Failed if none could be made). Pool mutex held.
  void renew(const ProcessId& id, Peer* peer, Link* link, std::vector<int>* created) noexcept;
  // A zero-copy message: builds sges_ from m.gather, then posts it whole
  // or, from stripe_min, striped (post_gather_striped).
  Status post_gather(Peer& peer, const hier::Message& m) noexcept;
  Status post_gather_striped(Peer& peer, const hier::Message& m) noexcept;
  // SGEs covering the message's bytes [at, at + len) on one QP of the pair,
  // in WRs of at most its send_sge() SGEs (wrs_, spans_), the header first
  // if `head`; stripe as post_span().
  Status post_sges(Endpoint& lane, const Peer& peer, const hier::Message& m,
                   std::span<ibv_sge> sges, std::size_t at, std::size_t len,
                   std::uint32_t stripe, bool head) noexcept;
  // A striped message's accounting once `posted` stripes went (st: ok
  // after all K, else why stripe `posted` failed).
  Status end_striped(Peer& peer, std::uint32_t posted, Status st) noexcept;
  // Failure transparency (rdma_transport_relay.cc; pool mutex held).
  // The peer's endpoint failed: its messages go through the relay from now on.
  void start_relaying(Peer& peer) noexcept;
  // A zero-copy message's bytes into packed_ (read from the ranks' buffers).
  bool pack_gather(const hier::Message& m) noexcept;
  // Sends this round's message to the peer through the relay.
  Status relay_message(Peer& peer) noexcept;
  // RelayHost (the waits of relay_book.h): relay_failed() relays every
  // pending message whose endpoint failed before its write was known to
  // complete; abort_pending() ends with fail_pending().
  Status poll_cq() noexcept override { return pool_->try_poll(); }
  void drain() noexcept override { (void)pool_->poll(); }
  bool path_failed() noexcept override;
  Status relay_failed() noexcept override;
  bool settled() const noexcept override;
  bool partner(std::size_t member) const noexcept override {
    return member < peers_.size() && peers_[member].ep != nullptr;
  }
  void idle() noexcept override;
  void keepalive() noexcept override;
  Status abort_pending(Status st) noexcept override;
  Status fail(Status st) noexcept override;
  // A relayed message's stripes that landed no longer count (RelayBook::take_notices).
  void relayed_in(std::size_t member, int parity) noexcept override;
  // One zero-length signalled write to the peer on QP `lane` of the pair
  // (keepalive(), ping()), its credit taken; false if it could not be posted
  // (the endpoint is then failed).
  bool post_alive(const Peer& peer, Endpoint& lane) noexcept;
  // The wait of complete() with a relay: no time limit. No lock held.
  Status complete_relayed() noexcept;
  // The slow path of taking `wrs` of the QP's send credits (after
  // Endpoint::take_send found too few): polls until other teams'
  // completions free them. The pool mutex is held at the call and the
  // return, dropped while polling.
  Status send_credits(Endpoint& ep, std::uint32_t wrs) noexcept;
  // fail(), and retires the endpoints of the failed post's partners. Pool mutex held.
  Status fail_pending(Status st) noexcept;

  EndpointPool* pool_;
  hier::StageAreas areas_;
  NetOptions opt_;  // this team's: timeout, idle callback (the pool's are the first team's)
  std::unique_ptr<MemoryRegion> in_mr_[2];
  std::unique_ptr<MemoryRegion> out_mr_[2];
  std::vector<int> first_rank_;
  std::vector<Peer> peers_;  // per member; ep == nullptr for members we do not exchange with
  Slot slot_;
  std::uint32_t slot_id_ = 0;
  std::vector<ibv_sge> sges_;  // post_gather's lists, kept to reuse their capacity
  std::vector<ibv_sge> stripe_sges_;  // a striped gather's stripe
  std::vector<ibv_sge> one_;
  std::vector<WrSpan> spans_;
  std::vector<ibv_send_wr> wrs_;
  std::vector<const Peer*> pending_;  // the last post()'s partners (capacity: peers_.size())
  int pending_parity_ = 0;
  hier::NetSpin spin_;  // complete()'s spin budget, from its recent waits
  std::uint64_t expect_arrived_[2] = {0, 0};
  std::uint64_t expect_sent_ = 0;
  int qps_created_ = 0;
  std::size_t setup_bytes_ = 0;
  bool broken_ = false;
  std::uint32_t me_ = 0;              // our member index: the immediates we write name it
  std::vector<char> packed_;  // a relayed zero-copy message's bytes
  // The relay and its counts (after slot_, which it reads).
  RelayBook book_;
};

}  // namespace mlxa2a::mlx5
