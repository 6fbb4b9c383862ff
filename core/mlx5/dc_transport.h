// The leaders' exchange over DC (mlx5 Dynamically Connected transport; issue
// 39 item 2, docs/hier-transports.md "DC"): what RdmaLeaderTransport does over
// RC, with a number of QPs per leader that does not grow with the node count.
// One DCT over an SRQ receives every partner's writes (the HCA checks the
// DCT's access key on each); a small pool of DCIs sends, each partner always
// through the same DCI, so a message's header write and data writes, and one
// round's messages and the next's, arrive in posting order (a DCI is one
// stream). Set-up in dc_setup.cc, the data path in dc_transport.cc, failures
// in dc_transport_relay.cc.
//
// Contract
// * create() is collective over boot's members, exactly as
//   RdmaLeaderTransport::create (same first_rank and peers). The caller picks
//   it when RC would take a leader past its QP budget (every leader learns
//   that alike from RC's set-up, core/mlx5/qp_budget.h). It always makes the
//   same two allgathers on every member (cards, outcome), whatever fails
//   locally, and reports failure as a Status with *why; the caller agrees on
//   the outcome across the team as for RC.
// * Resources: its own CQ, SRQ, DCT and DCIs on the process's device and PD
//   (the EndpointPool's; its RC endpoints are neither used nor counted), an
//   address handle per partner, the stage's areas registered. All local,
//   freed with the transport.
// * exchange()/post()/complete(): as hier::LeaderTransport, staged messages
//   only (gathers() is false). With a relay (set_relay(), the engine's), as
//   RC (relay_book.h): a failed post or write never fails the exchange; the
//   message goes through the relay, counted once by the partner (an
//   immediate names its sender, a wr_id the DCI and partner). The partner
//   whose write failed (not flushed) relays for good; a failed DCI is
//   retired and the other partners it served move to a live DCI (their
//   flushed messages relayed), or relay too when none is left; once its
//   messages have all completed it is reset to RTS. A partner is waited for
//   without a limit, keep-alives every NetOptions::keepalive_ms. What still
//   fails the call: a failed CQ or device (completions lost: an async event
//   the pool reads), a failed SRQ receive, or a message the relay cannot
//   carry (the partners hear kAbort). Without a relay (the
//   MPI-free tests): a write that fails, a CQ error, or no arrival within
//   NetOptions::timeout_ms fails the call (net_failed / timeout) and every
//   later one.
// * Not thread-safe per instance; instances share only the device (and the
//   pool's event reading).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "core/hier/net_spin.h"
#include "core/hier/transport.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/options.h"
#include "core/mlx5/relay_book.h"
#include "core/mlx5/resources.h"

namespace mlxa2a::mlx5 {

class DcLeaderTransport final : public hier::LeaderTransport, private RelayHost {
 public:
  // DCIs per leader: partners share them round robin (UCX's dc_mlx5 and
  // UCC's tl/mlx5 keep a pool of this order).
  static constexpr std::size_t kMaxDcis = 4;
  static constexpr std::uint32_t kDciDepth = 256;  // send WRs per DCI

  static Status create(GroupBootstrap& boot, const hier::StageAreas& areas,
                       std::span<const int> first_rank, std::span<const int> peers,
                       const NetOptions& opt, std::unique_ptr<DcLeaderTransport>* out,
                       std::string* why) noexcept;
  ~DcLeaderTransport() override;
  DcLeaderTransport(const DcLeaderTransport&) = delete;
  DcLeaderTransport& operator=(const DcLeaderTransport&) = delete;

  Status exchange(std::span<const hier::Message> messages) noexcept override;
  Status post(std::span<const hier::Message> messages) noexcept override;
  Status complete() noexcept override;
  const char* name() const noexcept override { return "dc"; }
  // QPs this transport holds: its DCT and DCIs (constant in the node count).
  std::size_t qps() const noexcept { return 1 + dcis_.size(); }
  // DCIs in RTS now (a failed one is back once its messages completed).
  std::size_t live_dcis() const noexcept {
    std::size_t n = 0;
    for (const Dci& d : dcis_) n += d.failed ? 0 : 1;
    return n;
  }
  std::size_t setup_bytes() const noexcept { return setup_bytes_; }
  // Set-up's last step, after create() on every leader (as RC's ping): a
  // zero-length write to every partner's DCT (its key checked), waited for,
  // so an unreachable pair or a refused key fails here, within the DCI's
  // retry budget, not in a user's call. false: *why says so.
  bool ping(std::string* why) noexcept;
  // The second path (hier::Relay), as RdmaLeaderTransport's.
  bool set_relay(std::unique_ptr<hier::Relay>& relay) noexcept override {
    book_.set_relay(std::move(relay));
    return true;
  }

 private:
  struct Dci {
    VerbsPtr<ibv_qp> qp;
    ibv_qp_ex* ex = nullptr;
    mlx5dv_qp_ex* dv = nullptr;
    std::uint32_t free = kDciDepth;      // send slots not in use
    std::vector<std::uint32_t> groups;   // WRs of each message in flight, oldest first
    std::size_t head = 0, count = 0;
    // An error completion or failed post: not posted on until reset, once
    // the completions of everything in flight on it are in (retire_message).
    bool failed = false;
  };
  struct Peer : RelayPeer {
    VerbsPtr<ibv_ah> ah;
    std::uint32_t dctn = 0;
    std::uint64_t key = 0;
    std::uint64_t out_addr[2] = {0, 0};
    std::uint32_t rkey[2] = {0, 0};
    std::uint64_t out_bytes = 0;
    std::size_t dci = 0;
    bool active = false;  // a partner of ours
    bool write_lost = false;  // this round's message's last WR completed in error (flushed or not)
  };
  struct Setup;  // create()'s steps (dc_setup.cc)
  DcLeaderTransport(EndpointPool* pool, std::shared_ptr<Device> dev,
                    const hier::StageAreas& areas, const NetOptions& opt)
      : pool_(pool), dev_(std::move(dev)), areas_(areas), opt_(opt), spin_(opt.oversubscribed),
        book_(*this, slot_, areas, "DC", "DC path") {}
  // Posts one message's WRs (header, data pieces) on its partner's DCI.
  Status post_message(Peer& peer, const hier::Message& m) noexcept;
  // post()'s step for one message: by RDMA, or through the relay when the
  // partner relays or its post fails (with a relay).
  Status send_one(Peer& peer) noexcept;
  // A message of `wrs` WRs was posted on the DCI: its slots are taken until
  // its signalled completion.
  void took(Dci& d, std::uint32_t wrs) noexcept;
  // Waits for `wrs` free slots of the DCI, polling the CQ.
  Status make_room(Dci& dci, std::uint32_t wrs) noexcept;
  // Drains the CQ once: arrivals (re-posting their receives), our writes'
  // completions. net_failed on a failed CQ or re-post, and (without a
  // relay) on an error completion.
  Status poll() noexcept;
  // An error completion of one of our writes (with a relay): the message it
  // carried is lost (relay_failed() sends it again), its DCI retired.
  void count_error(const ibv_wc& w) noexcept;
  // Failure transparency (dc_transport_relay.cc). DCI k failed (an error
  // completion, a failed post) because of a WR to `culprit` (-1: none):
  // that partner relays for good; the DCI's others move to a live DCI, or
  // relay when none is left.
  void retire_dci(std::size_t k, long culprit, const char* why) noexcept;
  // One zero-length signalled write to the peer (keepalive(), ping()); false
  // if it could not be posted.
  bool post_alive(Peer& peer) noexcept;
  // RelayHost (relay_book.h).
  Status poll_cq() noexcept override { return poll(); }
  void drain() noexcept override { (void)poll(); }
  bool path_failed() noexcept override { return false; }  // count_error() degrades the book
  Status relay_failed() noexcept override;
  bool settled() const noexcept override;
  bool partner(std::size_t member) const noexcept override {
    return member < peers_.size() && peers_[member].active;
  }
  void idle() noexcept override;
  void keepalive() noexcept override;
  Status abort_pending(Status st) noexcept override;
  Status post_receives(std::uint32_t n) noexcept;
  // A WR's wr_id: wire::wr_id with the DCI and whether the WR is its
  // message's last (signalled: its completion, success or error, comes
  // exactly once and settles the message) in the slot field.
  static std::uint64_t wr_id(std::size_t dci, std::uint32_t member, bool keepalive,
                             bool last) noexcept {
    return wire::wr_id(static_cast<std::uint32_t>(dci << 1 | (last ? 1u : 0u)), member, keepalive);
  }
  static std::size_t dci_of(std::uint64_t wr_id) noexcept { return (wr_id >> 3) & 0x1fffffffu; }
  static bool last_of(std::uint64_t wr_id) noexcept { return ((wr_id >> 2) & 1) != 0; }
  // A message (or keep-alive) on DCI k completed, well or not: its send
  // slots are free again; a failed DCI with none left in flight is reset.
  void retire_message(std::size_t k) noexcept;
  // A failed DCI with nothing in flight goes back to RTS (reset_dci).
  void reset_when_idle(std::size_t k) noexcept;
  // Back to RTS from the error state, its slots all free (dc_setup.cc);
  // false: it stays failed.
  bool reset_dci(Dci& d) noexcept;
  Status fail(Status st) noexcept override {
    broken_ = true;
    return st;
  }

  // The process's pool: its device's async events (a CQ or the device
  // failed) are read there; lives until MPI_Finalize, past every exchange.
  EndpointPool* pool_;
  std::shared_ptr<Device> dev_;  // declared before the verbs objects: outlives them
  hier::StageAreas areas_;
  NetOptions opt_;
  VerbsPtr<ibv_cq> cq_;
  VerbsPtr<ibv_srq> srq_;
  VerbsPtr<ibv_qp> dct_;
  std::vector<Dci> dcis_;
  std::unique_ptr<MemoryRegion> in_mr_[2];
  std::unique_ptr<MemoryRegion> out_mr_[2];
  std::vector<int> first_rank_;
  std::vector<Peer> peers_;  // per member
  std::uint64_t key_ = 0;    // our DCT's access key
  std::uint32_t me_ = 0;
  std::uint32_t srq_depth_ = 0;
  // Arrivals and completions, in all and per member (not in the pool: the
  // CQ is this transport's own; its thread alone polls it).
  Slot slot_;
  std::uint64_t expect_arrived_[2] = {0, 0};
  std::uint64_t expect_sent_ = 0;
  std::vector<Peer*> pending_;  // the last post()'s partners (capacity: peers_.size())
  int pending_parity_ = 0;
  bool broken_ = false;
  bool cq_failed_ = false;  // the CQ failed, or a receive did: nothing is counted for sure
  std::size_t setup_bytes_ = 0;
  hier::NetSpin spin_;  // the relayed wait's spin budget
  RelayBook book_;      // after slot_, which it reads
};

}  // namespace mlxa2a::mlx5
