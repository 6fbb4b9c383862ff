// The process-wide endpoint pool: one device (context, PD, CQ) per process
// and one RC queue pair per remote process, shared by every transport (team)
// whose leaders pair the same two processes — an MPI_Comm_split child reuses
// the QPs its parent's leaders created.
//
// Contract
// * get() opens the device at its first call; a failure is remembered and
//   returned again (with the same reason) without retrying. shutdown()
//   destroys the endpoints (QPs), then the device (CQ, PD, context) unless an
//   MR owner still holds it; it runs at MPI_Finalize, after the teams.
// * Endpoints live until shutdown(): QPs are bounded by the number of remote
//   processes, not by the number of communicators, and never being torn down
//   means two processes can never disagree on whether a pair is connected.
//   An endpoint that failed (QP in error) is replaced at the next set-up that
//   needs it. Endpoints are shared (shared_ptr) with the transports that use
//   them: discard() only retires one (marks it failed, forgets it), so a
//   transport still holding it sees `failed` at its next post and contains
//   its team (docs/hier.md, "Errors") instead of touching freed memory.
// * One CQ serves every endpoint, so whoever polls dispatches: an arrival
//   (RDMA write with immediate) is credited to the Slot named by its
//   immediate, a completion of ours to the Slot named by its wr_id, and each
//   consumed receive is re-posted at once (so receivers never run dry: RNR
//   never happens in normal operation). The CQ is sized for the QPs alive:
//   made for one endpoint, it grows (ibv_resize_cq, at least doubling) before
//   a new QP can post, so it covers every live QP's send and receive queues
//   and cannot overrun (an overrun loses completions for good: mlx5 reports
//   it only as IBV_EVENT_CQ_ERR). 1,024 endpoints still need 131,072 entries;
//   two need 256 (rounded up by the driver).
// * Thread safety (docs/hier.md, "Threads"): two locks. mutex() guards the
//   endpoints, their set-up and the producers' side of send credits (take,
//   post); the poll token guards the CQ: one thread at a time polls it and
//   dispatches what it read to the Slots and Endpoints, whose counters are
//   atomics read without a lock. Lock order: mutex() before the token; a
//   token holder never waits for mutex(), and nobody waits (spins) for a
//   completion with mutex() held: try_poll() is the waits' poll. Maps the
//   poller reads (slots, QP numbers) and the CQ's size change with both held.
//   Every member except get()/shutdown()/stats()/release_slot()/poll()/
//   try_poll()/check_events_now() must be called with mutex() held.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mlx5/options.h"
#include "core/mlx5/resources.h"
#include "core/status.h"

namespace mlxa2a::mlx5 {

struct AsyncEvent;

// Which process a leader is: its port's address and pid (plus a per-process
// nonce against pid reuse). Plain bytes: compared with memcmp.
struct ProcessId {
  std::uint8_t gid[16] = {};
  std::uint16_t lid = 0;
  std::uint16_t pad = 0;
  std::uint32_t pid = 0;
  std::uint64_t nonce = 0;
  friend bool operator<(const ProcessId& a, const ProcessId& b);
  friend bool operator==(const ProcessId& a, const ProcessId& b);
};

// What a write's immediate and a send's wr_id name (EndpointPool::poll):
//   immediate: the receiver's slot (14 bits) | stripe (1) | the sender's member (16) | parity (1)
//   wr_id:     the partner's member (32) | our slot (30) | keep-alive (1) | stripe (1)
// (the receives' wr_id is 1: a send's slot is never 0). Members are a
// transport's numbering of the team's leaders; the receiver learns from the
// immediate who wrote, so a message that also comes over the relay
// (hier::Relay) is counted once. `stripe`: one of the K stripes of a striped
// message (docs/hier-transports.md, "Stripes"), which counts as an arrival
// (a completion) only once all K of its pair's QPs had theirs; the stripe
// bit of a wr_id is on a stripe's signalled WR only.
namespace wire {
constexpr std::uint32_t kMaxSlot = (1u << 14) - 1;
constexpr std::uint32_t kMaxMembers = 1u << 16;
constexpr std::uint32_t kStripeBit = 1u << 17;
constexpr std::uint32_t imm(std::uint32_t slot, std::uint32_t member, int parity) {
  return slot << 18 | member << 1 | static_cast<std::uint32_t>(parity & 1);
}
constexpr std::uint64_t wr_id(std::uint32_t slot, std::uint32_t member, bool keepalive) {
  return std::uint64_t{member} << 32 | std::uint64_t{slot} << 2 | (keepalive ? 2u : 0u);
}
}  // namespace wire

// Per-member counters of a Slot: atomics, fixed in number once made (before
// the slot is added to the pool, so no poller sees it resized).
class CounterRow {
 public:
  void reset(std::size_t n) {
    v_.reset(new std::atomic<std::uint64_t>[n]());
    n_ = n;
  }
  std::size_t size() const noexcept { return n_; }
  std::atomic<std::uint64_t>& operator[](std::size_t i) noexcept { return v_[i]; }
  const std::atomic<std::uint64_t>& operator[](std::size_t i) const noexcept { return v_[i]; }

 private:
  std::unique_ptr<std::atomic<std::uint64_t>[]> v_;
  std::size_t n_ = 0;
};

// Counters of one transport. Written by whichever thread polls the CQ (with
// the poll token, not the pool mutex) and read by the owning team's thread
// without any lock: hence atomics (docs/hier.md, "Threads").
struct Slot {
  std::atomic<std::uint64_t> arrived[2] = {0, 0};  // writes with immediate received, per parity
  std::atomic<std::uint64_t> sent{0};              // our signalled data writes completed
  std::atomic<bool> failed{false};                 // one of our writes completed in error
  // The same per member (sized by the transport; an immediate naming a
  // member beyond them is counted in the totals only).
  CounterRow from[2];                 // arrivals from it, per parity
  CounterRow sent_to;                 // our data writes to it completed (stripes: each)
  // Striped messages (docs/hier-transports.md, "Stripes"), per member: its
  // stripes that arrived, per parity (every K of them are one arrival in
  // `from`), and our stripes to it whose completion was polled, failed ones
  // too (a message with a failed stripe is relayed once all its stripes are done).
  CounterRow stripes_from[2];
  CounterRow stripes_done;
  std::atomic<std::uint64_t> alive{0};  // our keep-alives (and set-up pings) completed
};

struct Endpoint {
  // Send credits, shared by every team posting on the QP (teams in several
  // threads share it): a send queue slot is free again only when the
  // signalled completion of its message retires it (the unsignalled WRs
  // before it with it; RC completes a send queue in order). A ring with one
  // producer and one consumer at a time: take_send()/untake_send() with the
  // pool mutex held (taking credits and posting the chain happen together,
  // so the ring's order is the send queue's), retire_send() by the poller
  // (poll token held). false: not enough free now.
  bool take_send(std::uint32_t wrs) noexcept {  // inline: once per message
    // Only producers lower the count (one at a time), the poller only
    // raises it. The ring cannot overflow: a message has at least one WR
    // and the count is at most the queue's depth, the ring's size.
    if (wrs > sq_free.load(std::memory_order_acquire)) return false;
    sq_free.fetch_sub(wrs, std::memory_order_relaxed);
    const std::uint32_t tail = sq_tail.load(std::memory_order_relaxed);
    sq_groups[tail % sq_groups.size()] = wrs;
    sq_tail.store(tail + 1, std::memory_order_release);
    return true;
  }
  void retire_send() noexcept;  // the oldest message's signalled completion was polled
  // Gives back what the last take_send() took (its post failed: nothing of
  // it reached the send queue, so no completion retires it). Pool mutex held.
  void untake_send(std::uint32_t wrs) noexcept {
    sq_tail.store(sq_tail.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    sq_free.fetch_add(wrs, std::memory_order_release);
  }

  // The pair's stripes (docs/hier-transports.md, "Stripes"): QPs 1..K-1 of
  // the pair, each an Endpoint of its own for its QP, PSN and send credits,
  // owned by QP 0's Endpoint, which alone is in the pool's map and whose
  // `failed` and `connected` are the pair's (owner: QP 0's; itself for it).
  std::vector<std::unique_ptr<Endpoint>> lanes;
  Endpoint* owner = this;
  std::uint32_t stripes() const noexcept { return 1 + static_cast<std::uint32_t>(lanes.size()); }
  Endpoint& lane(std::uint32_t s) noexcept { return s == 0 ? *this : *lanes[s - 1]; }

  std::unique_ptr<QueuePair> qp;
  std::uint32_t psn = 0;         // our initial send PSN
  std::uint32_t remote_qpn = 0;  // valid once connected
  bool connected = false;
  std::atomic<std::uint32_t> sq_free{0};  // send queue slots not in use
  std::vector<std::uint32_t> sq_groups;   // ring: WRs of each message in flight, oldest first
  std::atomic<std::uint32_t> sq_head{0};  // retired messages (the poller's)
  std::atomic<std::uint32_t> sq_tail{0};  // taken messages (the producers')
  // A completion on it failed (QP in error), its set-up failed, or it was
  // discarded: never posted to again. Any thread, any lock.
  std::atomic<bool> failed{false};
};

struct PoolStats {
  long qps_live;
  long mrs_live;
  std::uint64_t qps_created;
  std::uint64_t writes_posted;
  std::uint64_t bytes_written;
  std::uint64_t setup_bytes;        // RDMA set-ups' collectives, sent + received
  std::uint64_t setup_collectives;  // and how many
  // Threads (docs/hier.md, "Threads"): the most threads of this process seen
  // waiting in RDMA exchanges at once (none holds the pool mutex while it
  // waits), and polls that found another thread polling the shared CQ.
  std::uint64_t peak_waiters;
  std::uint64_t polls_contended;
  std::uint64_t stripes_posted;  // messages cut into stripes (docs/hier-transports.md, "Stripes")
};

class EndpointPool {
 public:
  static constexpr std::uint32_t kSendDepth = 64;
  static constexpr std::uint32_t kRecvDepth = 64;
  // SGEs per send WR for zero-copy gathers (capped by the device's max_sge):
  // a block layout needs one per local rank, round robin one per block.
  static constexpr std::uint32_t kSendSge = 16;
  // RC queue pairs per pair at most (MLXA2A_NET_STRIPES).
  static constexpr std::uint32_t kMaxStripes = 8;

  static EndpointPool* get(const NetOptions& opt, std::string* why) noexcept;
  // What this process can offer a team (resources.h): its open port's link
  // layer and subnet, nothing if opening failed, else what its ports have
  // (set-up only). link_layers() is its links.
  static PortOffer port_offer(const NetOptions& opt) noexcept;
  static std::uint32_t link_layers(const NetOptions& opt) noexcept { return port_offer(opt).links; }
  // The open port's device and number, false when this process has none.
  static bool open_port(NetOptions::Port* out) noexcept;
  static void shutdown() noexcept;
  static PoolStats stats() noexcept;
  // What a set-up's endpoints got (the fabric summary, hwcheck): the inline
  // bytes the last QP made reports (0 before any); the last registration's
  // relaxed-ordering state of its out-areas ("on", "refused", "off") and
  // what pages back its areas (hier::StageAreas::pages). Static strings.
  void note_inline(std::uint32_t bytes) noexcept;
  void note_registration(const char* relaxed_ordering, const char* pages) noexcept;
  static void count_writes(std::uint64_t writes, std::uint64_t bytes) noexcept;
  static void count_striped() noexcept;
  static void count_setup(std::uint64_t bytes, std::uint64_t collectives) noexcept;

  std::mutex& mutex() { return mutex_; }
  const std::shared_ptr<Device>& device() const { return device_; }
  const ProcessId& self() const { return self_; }
  const NetOptions& options() const { return opt_; }

  // The first get()'s options: device choice and QP attributes are per process.
  // The endpoint to `remote`: an existing one (connected, or failed), or a
  // new one in INIT (*created) with stripes() QPs (the first get()'s
  // MLXA2A_NET_STRIPES).
  Status endpoint(const ProcessId& remote, std::shared_ptr<Endpoint>* ep, bool* created) noexcept;
  // Connects a new endpoint's QPs (QP s to the remote's qpns[s], psns[s]:
  // ep.stripes() of each) and posts their receives.
  Status connect(Endpoint& ep, const PortAddress& remote, const std::uint32_t* qpns,
                 const std::uint32_t* psns) noexcept;
  // The QPs a new endpoint gets (MLXA2A_NET_STRIPES).
  std::uint32_t stripes() const noexcept;
  // RC queue pairs the pool holds (every stripe's), and whether an endpoint
  // goes to `remote` (a set-up's count against the QP budget, core/mlx5/qp_budget.h).
  std::size_t endpoint_count() const noexcept { return endpoints_.size() * stripes(); }
  bool has_endpoint(const ProcessId& remote) const noexcept {
    return endpoints_.find(remote) != endpoints_.end();
  }
  // Every endpoint's QPs, QP 0 (the pair's stripe 0) first: what tests and
  // diagnostics read back (flow labels, the stripes' remote QP numbers).
  std::vector<std::vector<ibv_qp*>> queue_pairs() const;
  // Retires an endpoint (a new one whose set-up failed, or a failed one):
  // marks it failed and forgets it; its QP dies with its last holder.
  void discard(const ProcessId& remote) noexcept;

  // A free slot id (1..wire::kMaxSlot, reused once released), 0 when every
  // one is taken. May throw std::bad_alloc.
  std::uint32_t add_slot(Slot* s);
  // Forgets a slot, if the pool still exists (a team freed inside
  // MPI_Finalize outlives shutdown()). Takes mutex() itself.
  static void release_slot(std::uint32_t id) noexcept;
  // Drains the CQ once, waiting for the poll token if another thread holds
  // it: when it returns, every completion in the CQ at the call was
  // dispatched. net_failed if the CQ itself failed (overrun) or the device
  // did (an async event). Either lock state (never with the token held).
  Status poll() noexcept { return poll_once(true); }
  // A wait's poll: drains the CQ if no other thread is polling it, else
  // returns at once (that thread dispatches our completions too). Never
  // with mutex() held.
  Status try_poll() noexcept { return poll_once(false); }
  // check_events() taking mutex() itself (waits, which hold no lock).
  void check_events_now() noexcept;
  // Whether the pool's CQ overran or an async event failed a CQ or the
  // device (IBV_EVENT_CQ_ERR names no CQ we can tell apart: the DC
  // transport's own CQ is on the same context). Any thread.
  bool device_failed() const noexcept { return cq_failed_.load(std::memory_order_relaxed); }
  // Counts a thread waiting in an exchange while it lives (PoolStats).
  class Waiter {
   public:
    Waiter() noexcept;
    ~Waiter();
    Waiter(const Waiter&) = delete;
    Waiter& operator=(const Waiter&) = delete;
  };
  // Reads the device's pending async events (non-blocking) and contains
  // each: a QP's error retires its endpoint; a port error refuses new
  // set-ups until the port is ACTIVE again but fails no endpoint (RC QPs
  // retry through a flap inside their budget; one that runs out fails by its
  // completion); PORT_ACTIVE and address events (LID/GID/P_Key/SM change,
  // client reregister) read the port's address again and rebuild self() and
  // what set-ups publish; a CQ or device error ends the whole pool. Each is
  // logged with its name; the last containing one's name is last_event().
  // Off the data path: set-ups and waits that yield call it.
  void check_events() noexcept;
  // Whether a new set-up may use the port: reads pending events first (so
  // an address change is in self()/device()->address() before the card is
  // made); unavailable while the port is down or has no address, net_failed
  // once the CQ or device failed, with *why.
  Status ready(std::string* why) noexcept;
  // RoCE GID choice (gid_choice.h): the candidates this process offers a
  // set-up (all until the first set-up chose, then the one in use), and the
  // choice, applied once, before any QP exists and only when it shares a
  // subnet with every other leader (traced: gid=, gid-by=).
  GidList gid_offer() const noexcept;
  void use_gid(int k) noexcept;
  // The name of the last containing async event of this process ("" if
  // none), for the containment trace. Any thread.
  static const char* last_event() noexcept;

 private:
  EndpointPool() = default;
  Status post_recvs(Endpoint& ep, std::uint32_t n) noexcept;
  // One QP of a new endpoint (its lane `e`): created, credits and PSN set.
  Status make_qp(Endpoint& e) noexcept;
  // Marks a connected endpoint failed unless its QP is in RTS (ibv_query_qp).
  void check_state(Endpoint& ep) noexcept;
  void fail_all() noexcept;
  void set_self() noexcept;  // self_'s address from the device's
  void on_port_event(const AsyncEvent& ev) noexcept;
  void refresh_address(const char* event) noexcept;
  bool gid_fixed() const noexcept;
  void summarize() noexcept;  // the trace's fabric summary (qos.h)
  // poll() and try_poll(): takes the poll token (waits for it if `wait`,
  // else returns at once when another thread holds it), drains the CQ,
  // gives the token back.
  Status poll_once(bool wait) noexcept;
  // One completion, the token held (inlined into poll_once's loop).
  [[gnu::always_inline]] inline Status dispatch(const ibv_wc& c) noexcept;
  [[gnu::cold]] void write_failed(const ibv_wc& c, Endpoint* ep, Slot* slot) noexcept;
  // Holds the poll token for its life (waiting for it): for those that
  // change what pollers read. Bounded: a holder only drains the CQ.
  class Token {
   public:
    explicit Token(EndpointPool& p) noexcept;
    ~Token() { p_.polling_.store(false, std::memory_order_release); }
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;

   private:
    EndpointPool& p_;
  };

  std::shared_ptr<Device> device_;  // declared first: outlives the endpoints
  NetOptions opt_;
  ProcessId self_;
  std::mutex mutex_;
  // The poll token (ordered after mutex_): a flag, not a mutex, so that
  // an uncontended poll costs one exchange and one store.
  std::atomic<bool> polling_{false};
  std::map<ProcessId, std::shared_ptr<Endpoint>> endpoints_;
  std::unordered_map<std::uint32_t, Endpoint*> by_qpn_;
  std::unordered_map<std::uint32_t, Slot*> slots_;
  std::uint32_t next_slot_ = 1;
  // The CQ or the device failed: no RDMA in this process any more.
  std::atomic<bool> cq_failed_{false};
  bool port_down_ = false;  // IBV_EVENT_PORT_ERR seen, no IBV_EVENT_PORT_ACTIVE since
  bool no_address_ = false; // the last re-read of the port's address failed
  bool events_ = false;     // the async fd is non-blocking: check_events() may read it
  std::string gid_by_ = "first";  // why the GID in use: first (not chosen yet), subnet, ...
  std::uint32_t inline_granted_ = 0;  // note_inline()
  bool inline_noted_ = false;
  const char* relaxed_ordering_ = "";  // note_registration(); "": none yet
  const char* pages_ = "";
};

}  // namespace mlxa2a::mlx5
