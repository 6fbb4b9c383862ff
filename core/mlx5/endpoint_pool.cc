#include "core/mlx5/endpoint_pool.h"

#include <arpa/inet.h>
#include <sched.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cstring>
#include <limits>

#include "core/log.h"
#include "core/mlx5/async_events.h"
#include "core/mlx5/link_layer.h"

namespace mlxa2a::mlx5 {

namespace {

std::mutex g_mutex;  // guards the three below
std::unique_ptr<EndpointPool> g_pool;
std::string g_why;
bool g_tried = false;

std::atomic<std::uint64_t> g_qps_created{0};
std::atomic<std::uint64_t> g_writes{0};
std::atomic<std::uint64_t> g_bytes{0};
std::atomic<std::uint64_t> g_setup_bytes{0};
std::atomic<std::uint64_t> g_setup_collectives{0};
std::atomic<const char*> g_last_event{""};
std::atomic<std::uint64_t> g_waiters{0};
std::atomic<std::uint64_t> g_peak_waiters{0};
std::atomic<std::uint64_t> g_polls_contended{0};
std::atomic<std::uint64_t> g_striped{0};

constexpr std::uint64_t kRecvTag = 1;  // wr_id of every receive; sends carry slot << 1

}  // namespace

bool operator<(const ProcessId& a, const ProcessId& b) { return std::memcmp(&a, &b, sizeof a) < 0; }
void Endpoint::retire_send() noexcept {
  const std::uint32_t head = sq_head.load(std::memory_order_relaxed);
  // None in flight: a flushed unsignalled WR of a QP in error.
  if (head == sq_tail.load(std::memory_order_acquire)) return;
  const std::uint32_t wrs = sq_groups[head % sq_groups.size()];
  sq_head.store(head + 1, std::memory_order_release);
  sq_free.fetch_add(wrs, std::memory_order_release);
}

bool operator==(const ProcessId& a, const ProcessId& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

EndpointPool* EndpointPool::get(const NetOptions& opt, std::string* why) noexcept {
  std::lock_guard<std::mutex> lock(g_mutex);
  try {
    if (!g_tried) {
      g_tried = true;
      const Verbs* v = load_verbs(opt.verbs_library.c_str());
      if (!v) {
        g_why = verbs_unavailable_reason();
      } else {
        std::unique_ptr<EndpointPool> p(new EndpointPool);
        p->opt_ = opt;
        // Sized for one endpoint; endpoint() grows it with the QPs.
        const int depth = static_cast<int>(kSendDepth + kRecvDepth);
        if (Device::open(*v, opt, depth, &p->device_, &g_why) == Status::ok) {
          if (p->device_->cq_depth() < depth) {
            g_why = "the device's largest CQ is too small";
          } else {
            const PortAddress& a = p->device_->address();
            p->set_self();
            p->self_.pid = static_cast<std::uint32_t>(getpid());
            p->self_.nonce = static_cast<std::uint64_t>(
                std::chrono::steady_clock::now().time_since_epoch().count()) ^
                reinterpret_cast<std::uintptr_t>(p.get());
            p->events_ = make_nonblocking(p->device_->context());
            g_pool = std::move(p);
            const Device& d = *g_pool->device_;
            g_pool->summarize();
            MLXA2A_LOG(Info, "RDMA: %s port %d (%s, chosen by %s) %s%s", d.name().c_str(),
                       d.port(), a.roce ? "RoCE" : "InfiniBand", d.choice().c_str(),
                       describe(d.qos()).c_str(), v->have_mlx5 ? "" : ", libmlx5 absent");
          }
        }
      }
      if (!g_pool) MLXA2A_LOG(Info, "RDMA unavailable: %s", g_why.c_str());
    }
    if (!g_pool) *why = g_why;
  } catch (...) {
    *why = "out of memory";
    return nullptr;
  }
  return g_pool.get();
}

PortOffer EndpointPool::port_offer(const NetOptions& opt) noexcept {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_pool) {
      std::lock_guard<std::mutex> pool_lock(g_pool->mutex_);  // the address may be refreshed
      const PortAddress& a = g_pool->device_->address();
      PortOffer o;
      o.links = a.roce ? kLinkEth : kLinkIb;
      if (!a.roce) o.add_subnet(ib_subnet_of(a.gid));
      return o;
    }
    if (g_tried) return {};
  }
  const Verbs* v = load_verbs(opt.verbs_library.c_str());
  return v ? available_ports(*v, opt) : PortOffer{};
}

bool EndpointPool::open_port(NetOptions::Port* out) noexcept try {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_pool) return false;
  *out = {g_pool->device_->name(), g_pool->device_->port()};
  return true;
} catch (...) {  // allocation only
  return false;
}

void EndpointPool::summarize() noexcept try {
  const Device& d = *device_;
  const PortAddress& a = d.address();
  std::string gid;
  if (a.roce) gid = "gid=" + std::to_string(a.gid_index) + " gid-by=" + gid_by_ + " ";
  std::string regs;  // issue 39 item 6: what the QPs and out-areas got
  if (inline_noted_) regs += " inline=" + std::to_string(inline_granted_);
  if (*relaxed_ordering_) regs += std::string(" relaxed-ordering=") + relaxed_ordering_;
  if (*pages_) regs += std::string(" hugepages=") + pages_;
  regs += " qps-per-pair=" + std::to_string(opt_.stripes);  // RC: MLXA2A_NET_STRIPES
  set_fabric_summary("hca=" + d.name() + ":" + std::to_string(d.port()) + " hca-by=" +
                     d.choice() + (a.roce ? " link=roce " : " link=ib ") +
                     (opt_.link_matched ? "link-by=team " : "") + gid + describe(d.qos()) + regs);
} catch (...) {  // allocation only: the trace keeps the last summary
}

void EndpointPool::note_inline(std::uint32_t bytes) noexcept {
  if (inline_noted_ && bytes == inline_granted_) return;
  inline_noted_ = true;
  inline_granted_ = bytes;
  summarize();
}

void EndpointPool::note_registration(const char* relaxed_ordering, const char* pages) noexcept {
  if (std::strcmp(relaxed_ordering, relaxed_ordering_) == 0 && std::strcmp(pages, pages_) == 0) {
    return;
  }
  relaxed_ordering_ = relaxed_ordering;
  pages_ = pages;
  summarize();
}

GidList EndpointPool::gid_offer() const noexcept {
  GidList l;
  const std::vector<GidCandidate>& c = device_->gids();
  if (!gid_fixed()) {
    for (std::size_t i = 0; i < c.size() && i < kMaxGidCandidates; ++i) l.e[l.n++] = c[i];
    return l;
  }
  for (const GidCandidate& g : c) {
    if (g.index == device_->address().gid_index) l.e[l.n++] = g;  // the one in use
  }
  return l;
}

bool EndpointPool::gid_fixed() const noexcept {
  return !endpoints_.empty() || QueuePair::live_count() > 0 || gid_by_ != "first";
}

void EndpointPool::use_gid(int k) noexcept {
  if (gid_fixed() || k < 0 || static_cast<std::size_t>(k) >= device_->gids().size()) return;
  device_->use_gid(static_cast<std::size_t>(k));
  gid_by_ = opt_.gid_index >= 0 ? "MLXA2A_NET_GID_INDEX" : "subnet";
  MLXA2A_LOG(Info, "RDMA: GID index %d (its subnet is the other nodes' leaders')",
             device_->address().gid_index);
  summarize();
}

void EndpointPool::shutdown() noexcept {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pool.reset();
  g_why = "after shutdown";
}

PoolStats EndpointPool::stats() noexcept {
  return {QueuePair::live_count(), MemoryRegion::live_count(),
          g_qps_created.load(std::memory_order_relaxed), g_writes.load(std::memory_order_relaxed),
          g_bytes.load(std::memory_order_relaxed), g_setup_bytes.load(std::memory_order_relaxed),
          g_setup_collectives.load(std::memory_order_relaxed),
          g_peak_waiters.load(std::memory_order_relaxed),
          g_polls_contended.load(std::memory_order_relaxed),
          g_striped.load(std::memory_order_relaxed)};
}

EndpointPool::Waiter::Waiter() noexcept {
  const std::uint64_t now = g_waiters.fetch_add(1, std::memory_order_relaxed) + 1;
  std::uint64_t peak = g_peak_waiters.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_waiters.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

EndpointPool::Waiter::~Waiter() { g_waiters.fetch_sub(1, std::memory_order_relaxed); }

void EndpointPool::count_setup(std::uint64_t bytes, std::uint64_t collectives) noexcept {
  g_setup_bytes.fetch_add(bytes, std::memory_order_relaxed);
  g_setup_collectives.fetch_add(collectives, std::memory_order_relaxed);
}

void EndpointPool::count_striped() noexcept { g_striped.fetch_add(1, std::memory_order_relaxed); }

void EndpointPool::count_writes(std::uint64_t writes, std::uint64_t bytes) noexcept {
  g_writes.fetch_add(writes, std::memory_order_relaxed);
  g_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

Status EndpointPool::endpoint(const ProcessId& remote, std::shared_ptr<Endpoint>* ep,
                              bool* created) noexcept {
  *created = false;
  check_events();
  if (cq_failed_) return Status::net_failed;
  if (port_down_ || no_address_) return Status::unavailable;
  try {
    if (auto it = endpoints_.find(remote); it != endpoints_.end()) {
      // Error completions not yet polled, or a QP the HCA moved to the error
      // state without one (a late write hitting a deregistered rkey puts the
      // responder in ERR): never hand such a QP to a new team.
      if (poll() != Status::ok) return Status::net_failed;
      check_events();  // the events that poll raised (a QP's own error, by name)
      if (cq_failed_) return Status::net_failed;
      if (it->second->connected && !it->second->failed) {
        check_state(*it->second);
        if (it->second->failed) {  // collect what its error raised: flushes, its event by name
          if (poll() != Status::ok) return Status::net_failed;
          check_events();
        }
      }
      if (!it->second->failed) {
        *ep = it->second;
        return Status::ok;
      }
      discard(remote);  // replaced below; the peer replaces its end alike
    }
    // No count limit: the device's QP and CQ limits are the bounds (the CQ
    // grows below, or the pair is refused with the reason logged).
    auto e = std::make_shared<Endpoint>();
    if (const Status st = make_qp(*e); st != Status::ok) return st;
    for (std::uint32_t s = 1; s < stripes(); ++s) {
      e->lanes.push_back(std::make_unique<Endpoint>());
      e->lanes.back()->owner = e.get();
      if (const Status st = make_qp(*e->lanes.back()); st != Status::ok) return st;
    }
    note_inline(e->qp->inline_bytes());
    // Before anything is posted on it: room in the CQ for every live QP's
    // send and receive queues (retired ones too while a transport holds them).
    const long need = QueuePair::live_count() *
                      static_cast<long>(e->qp->send_depth() + e->qp->recv_depth());
    const Token token(*this);  // the CQ's size and by_qpn_ (pollers read them)
    if (need > std::numeric_limits<int>::max() || !device_->grow_cq(static_cast<int>(need))) {
      MLXA2A_LOG(Info, "RDMA: the completion queue cannot grow to %ld entries", need);
      return Status::unavailable;
    }
    g_qps_created.fetch_add(e->stripes(), std::memory_order_relaxed);
    for (std::uint32_t s = 0; s < e->stripes(); ++s) by_qpn_[e->lane(s).qp->qpn()] = &e->lane(s);
    endpoints_[remote] = e;
    *ep = std::move(e);
    *created = true;
    return Status::ok;
  } catch (...) {
    return Status::net_failed;
  }
}

Status EndpointPool::make_qp(Endpoint& e) noexcept {
  const Status st =
      QueuePair::create(device_, {kSendDepth, kRecvDepth, opt_.inline_ask, kSendSge}, &e.qp);
  if (st != Status::ok) return st;
  e.sq_free = e.qp->send_depth();
  // A message has at least one WR; a power of two, so that the free-running
  // ring indices stay consistent when they wrap.
  e.sq_groups.assign(std::bit_ceil(e.qp->send_depth()), 0);
  e.psn = (e.qp->qpn() * 2654435761u) & 0xffffff;
  return Status::ok;
}

std::uint32_t EndpointPool::stripes() const noexcept {
  return opt_.stripes < 1 ? 1 : opt_.stripes > kMaxStripes ? kMaxStripes : opt_.stripes;
}

void EndpointPool::check_state(Endpoint& ep) noexcept {
  const Verbs& v = device_->verbs();
  if (!v.query_qp) return;
  for (std::uint32_t s = 0; s < ep.stripes(); ++s) {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    QueuePair& qp = *ep.lane(s).qp;
    if (v.query_qp(qp.get(), &a, IBV_QP_STATE, &init) == 0 && a.qp_state == IBV_QPS_RTS) continue;
    MLXA2A_LOG(Warn, "RDMA: queue pair %u is not ready to send (state %d): replaced", qp.qpn(),
               static_cast<int>(a.qp_state));
    ep.failed = true;
    return;
  }
}

Status EndpointPool::post_recvs(Endpoint& ep, std::uint32_t n) noexcept {
  // A write with immediate consumes a receive but places no data through
  // it: no scatter list is needed (man ibv_post_recv, IB spec 9.4.3).
  for (std::uint32_t i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = kRecvTag;
    ibv_recv_wr* bad = nullptr;
    if (Verbs::post_recv(ep.qp->get(), &wr, &bad) != 0) return Status::net_failed;
  }
  return Status::ok;
}

Status EndpointPool::connect(Endpoint& ep, const PortAddress& remote, const std::uint32_t* qpns,
                             const std::uint32_t* psns) noexcept {
  for (std::uint32_t s = 0; s < ep.stripes(); ++s) {
    Endpoint& l = ep.lane(s);
    // Receives first: the peer may write as soon as its end is in RTS.
    if (post_recvs(l, l.qp->recv_depth()) != Status::ok) return Status::net_failed;
    if (l.qp->connect(remote, qpns[s], psns[s], l.psn, opt_, s) != Status::ok) {
      return Status::net_failed;
    }
    l.remote_qpn = qpns[s];
  }
  ep.connected = true;
  return Status::ok;
}

std::vector<std::vector<ibv_qp*>> EndpointPool::queue_pairs() const {
  std::vector<std::vector<ibv_qp*>> all;
  for (const auto& [id, ep] : endpoints_) {
    all.emplace_back();
    for (std::uint32_t s = 0; s < ep->stripes(); ++s) all.back().push_back(ep->lane(s).qp->get());
  }
  return all;
}

void EndpointPool::discard(const ProcessId& remote) noexcept {
  auto it = endpoints_.find(remote);
  if (it == endpoints_.end()) return;
  it->second->failed = true;  // for the transports still holding it
  const Token token(*this);
  for (std::uint32_t s = 0; s < it->second->stripes(); ++s) {
    by_qpn_.erase(it->second->lane(s).qp->qpn());
  }
  endpoints_.erase(it);
}

std::uint32_t EndpointPool::add_slot(Slot* s) {
  const Token token(*this);
  for (std::uint32_t tries = 0; tries < wire::kMaxSlot; ++tries) {
    const std::uint32_t id = next_slot_;
    next_slot_ = next_slot_ == wire::kMaxSlot ? 1 : next_slot_ + 1;
    if (slots_.emplace(id, s).second) return id;
  }
  return 0;
}

void EndpointPool::release_slot(std::uint32_t id) noexcept {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_pool) return;
  std::lock_guard<std::mutex> pool_lock(g_pool->mutex_);
  const Token token(*g_pool);  // no poller dispatches to it after this
  g_pool->slots_.erase(id);
}

const char* EndpointPool::last_event() noexcept {
  return g_last_event.load(std::memory_order_relaxed);
}

void EndpointPool::fail_all() noexcept {
  for (auto& [id, ep] : endpoints_) ep->failed = true;
}

void EndpointPool::set_self() noexcept {
  const PortAddress& a = device_->address();
  std::memcpy(self_.gid, a.gid, sizeof a.gid);
  self_.lid = a.lid;
}

// The port's address is read again and what new set-ups are offered (our
// ProcessId, card address, GID candidates) rebuilt from it. A changed
// ProcessId also makes partners treat the pair as new: their QPs to our old
// address are replaced at the next set-up (link_rule.h's repair), as they
// would no longer reach us.
void EndpointPool::refresh_address(const char* event) noexcept {
  std::string why;
  const ProcessId before = self_;
  if (!device_->refresh(opt_, &why)) {
    no_address_ = true;
    MLXA2A_LOG(Warn, "RDMA: after %s %s port %d has no usable address (%s): new teams fall "
               "back to PMPI until it has", event, device_->name().c_str(), device_->port(),
               why.c_str());
    return;
  }
  no_address_ = false;
  set_self();
  summarize();
  if (before == self_) {
    MLXA2A_LOG(Info, "RDMA: after %s %s port %d keeps its address", event,
               device_->name().c_str(), device_->port());
    return;
  }
  MLXA2A_LOG(Warn, "RDMA: after %s %s port %d has a new address (LID %u, MTU %d): new teams "
             "use it; pairs connected to the old one are replaced", event,
             device_->name().c_str(), device_->port(), device_->address().lid,
             128 << device_->address().mtu);
}

void EndpointPool::on_port_event(const AsyncEvent& ev) noexcept {
  using Scope = AsyncEvent::Scope;
  if (ev.port != 0 && ev.port != device_->port()) {  // another port of the device
    MLXA2A_LOG(Info, "RDMA: async event %s on port %d (not ours)", ev.name, ev.port);
    return;
  }
  if (ev.scope == Scope::port) {
    // Its QPs are not failed: an RC QP retries for its whole budget (ACK
    // timeout x retries, ~8.6 s by default), so a flap shorter than that
    // costs a stall, not the communicator. A QP whose budget runs out fails
    // by its error completion. Only new connections wait for the port.
    g_last_event.store(ev.name, std::memory_order_relaxed);
    port_down_ = true;
    MLXA2A_LOG(Warn, "RDMA: async event %s on %s port %d: queue pairs retry until it returns "
               "(or their retries run out); new teams fall back to PMPI until it is active",
               ev.name, device_->name().c_str(), device_->port());
    return;
  }
  MLXA2A_LOG(Info, "RDMA: async event %s", ev.name);
  if (ev.scope == Scope::port_up) port_down_ = false;
  refresh_address(ev.name);  // PORT_ACTIVE too: the SM may have given a new LID
}

void EndpointPool::check_events() noexcept {
  if (!events_) return;
  AsyncEvent ev;
  while (next_async_event(device_->verbs(), device_->context(), &ev)) {
    using Scope = AsyncEvent::Scope;
    switch (ev.scope) {
      case Scope::info:
        MLXA2A_LOG(Info, "RDMA: async event %s", ev.name);
        break;
      case Scope::port:
      case Scope::port_up:
      case Scope::address:
        on_port_event(ev);
        break;
      case Scope::qp: {
        g_last_event.store(ev.name, std::memory_order_relaxed);
        auto it = by_qpn_.find(ev.qpn);
        if (it != by_qpn_.end()) it->second->owner->failed = true;
        MLXA2A_LOG(Warn, "RDMA: async event %s on queue pair %u: its teams fall back to PMPI",
                   ev.name, ev.qpn);
        break;
      }
      case Scope::device:
        g_last_event.store(ev.name, std::memory_order_relaxed);
        fail_all();
        cq_failed_ = true;
        MLXA2A_LOG(Error, "RDMA: async event %s on %s: RDMA is off in this process", ev.name,
                   device_->name().c_str());
        break;
    }
  }
}

Status EndpointPool::ready(std::string* why) noexcept {
  check_events();
  if (cq_failed_) {
    *why = std::string("RDMA is off in this process (") + last_event() + ")";
    return Status::net_failed;
  }
  if (port_down_ || no_address_) {
    *why = device_->name() + " port " + std::to_string(device_->port()) +
           (port_down_ ? " is down" : " has no usable address");
    return Status::unavailable;
  }
  return Status::ok;
}

void EndpointPool::check_events_now() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  check_events();
}

EndpointPool::Token::Token(EndpointPool& p) noexcept : p_(p) {
  while (p_.polling_.exchange(true, std::memory_order_acquire)) sched_yield();
}

void EndpointPool::write_failed(const ibv_wc& c, Endpoint* ep, Slot* slot) noexcept {
  const Verbs& v = device_->verbs();
  MLXA2A_LOG(Warn, "RDMA write failed: %s (status %d, qp %u)",
             v.wc_status_str ? v.wc_status_str(c.status) : "", static_cast<int>(c.status),
             c.qp_num);
  if (ep) ep->owner->failed = true;
  if (slot) slot->failed = true;
}

Status EndpointPool::dispatch(const ibv_wc& c) noexcept {
  auto ep_it = by_qpn_.find(c.qp_num);
  Endpoint* ep = ep_it == by_qpn_.end() ? nullptr : ep_it->second;
  if (c.wr_id == kRecvTag) {
    if (c.status != IBV_WC_SUCCESS) {
      if (ep) ep->owner->failed = true;
      return Status::ok;
    }
    const std::uint32_t imm = ntohl(c.imm_data);
    if (auto s = slots_.find(imm >> 18); s != slots_.end()) {
      Slot& slot = *s->second;
      const std::uint32_t par = imm & 1, member = (imm >> 1) & 0xffff;
      // A stripe is an arrival once its message's K are in (each on its own
      // QP of the pair: any order); the others are only counted.
      if ((imm & wire::kStripeBit) != 0 && ep && member < slot.stripes_from[par].size() &&
          (slot.stripes_from[par][member].fetch_add(1) + 1) % ep->owner->stripes() != 0) {
        if (post_recvs(*ep, 1) != Status::ok) ep->owner->failed = true;
        return Status::ok;
      }
      // The member's count first: a reader that sees the total complete
      // then sees every member's (settled(), relay duplicates).
      if (member < slot.from[par].size()) slot.from[par][member].fetch_add(1);
      slot.arrived[par].fetch_add(1);
    }
    if (ep && post_recvs(*ep, 1) != Status::ok) ep->owner->failed = true;
    return Status::ok;
  }
  auto s = slots_.find(static_cast<std::uint32_t>(c.wr_id >> 2) & 0x3fffffff);
  if (ep) ep->retire_send();
  const std::uint64_t member = c.wr_id >> 32;
  if ((c.wr_id & 1) != 0 && s != slots_.end() && member < s->second->stripes_done.size()) {
    s->second->stripes_done[member].fetch_add(1);  // a stripe's signalled WR, failed or not
  }
  if (c.status != IBV_WC_SUCCESS) {
    write_failed(c, ep, s != slots_.end() ? s->second : nullptr);
  } else if (s != slots_.end() && (c.wr_id & 2) != 0) {
    ++s->second->alive;
  } else if (s != slots_.end()) {
    Slot& slot = *s->second;
    if (member < slot.sent_to.size()) slot.sent_to[member].fetch_add(1);
    slot.sent.fetch_add(1);
  }
  return Status::ok;
}

Status EndpointPool::poll_once(bool wait) noexcept {
  if (polling_.exchange(true, std::memory_order_acquire)) {
    if (!wait) {  // another thread polls, for everyone
      g_polls_contended.fetch_add(1, std::memory_order_relaxed);
      return cq_failed_.load(std::memory_order_relaxed) ? Status::net_failed : Status::ok;
    }
    while (polling_.exchange(true, std::memory_order_acquire)) sched_yield();
  }
  Status st = Status::ok;
  ibv_wc wc[32];
  for (int n = 32; st == Status::ok && n == 32;) {
    if (cq_failed_.load(std::memory_order_relaxed)) {
      st = Status::net_failed;
      break;
    }
    n = Verbs::poll_cq(device_->cq(), 32, wc);
    if (n < 0) {
      // An overrun CQ loses completions for good (IBV_EVENT_CQ_ERR).
      cq_failed_ = true;
      MLXA2A_LOG(Error, "RDMA: completion queue failed (%d)", n);
      st = Status::net_failed;
    }
    for (int i = 0; i < n; ++i) (void)dispatch(wc[i]);
  }
  polling_.store(false, std::memory_order_release);
  return st;
}

}  // namespace mlxa2a::mlx5
