#include "core/mlx5/rdma_transport.h"

#include <arpa/inet.h>
#include <sched.h>

#include <chrono>
#include <cstring>

#include "core/arch.h"
#include "core/log.h"
#include "core/mlx5/gid_choice.h"
#include "core/mlx5/link_layer.h"
#include "core/mlx5/link_rule.h"
#include "core/wait_cpu.h"

namespace mlxa2a::mlx5 {

namespace {

// What every leader publishes in the first allgather.
struct Card {
  ProcessId id;
  PortAddress addr;
  std::uint32_t ok = 0;
  std::uint32_t slot = 0;
  std::uint64_t out_addr[2] = {0, 0};
  std::uint32_t rkey[2] = {0, 0};
  std::uint64_t out_bytes = 0;
  GidList gids;  // RoCE: the GIDs this leader may use (gid_choice.h)
};

// What a leader says about its endpoint towards one member (second allgather).
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

// Round 0: the link layers each leader's ports offer; the team takes one
// they all have (link_layer.h), so no leader opens a port the other nodes
// cannot reach. Collective: one allgather whatever happens.
EndpointPool* open_pool(GroupBootstrap& boot, const NetOptions& opt, std::string* why) noexcept {
  const std::uint32_t offer = EndpointPool::link_layers(opt);
  std::vector<std::uint32_t> offers;
  try {
    offers.resize(static_cast<std::size_t>(boot.size()));
  } catch (...) {
    offers.clear();
  }
  const bool got = !offers.empty() && boot.allgather(&offer, offers.data(), sizeof offer);
  if (offer == 0) return EndpointPool::get(opt, why);  // says why this process has no RDMA
  if (!got) {
    *why = "set-up allgather failed";
    return nullptr;
  }
  NetOptions net = opt;
  net.link_layers = agree_link_layer(offers.data(), boot.size());
  if (net.link_layers == 0) {
    *why = std::string("no link layer in common with the other nodes' leaders (here: ") +
           link_layer_name(offer) + ")";
    MLXA2A_LOG(Info, "RDMA: %s", why->c_str());
    return nullptr;
  }
  if (offer != net.link_layers) {
    net.link_matched = true;
    MLXA2A_LOG(Info, "RDMA: %s ports skipped: the other nodes' leaders have only %s",
               link_layer_name(offer & ~net.link_layers), link_layer_name(net.link_layers));
  }
  return EndpointPool::get(net, why);
}

// Which GID each RoCE member uses, the same on every member (gid_choice.h):
// ours is applied to the pool (once), the partners' replace their cards'
// addresses, so both ends of every pair agree.
void choose_gids(EndpointPool* pool, int me, std::vector<Card>* cards) noexcept {
  const int n = static_cast<int>(cards->size());
  std::vector<GidList> lists;
  try {
    lists.resize(cards->size());
  } catch (...) {
    return;  // addresses as published: the first GIDs
  }
  for (int m = 0; m < n; ++m) {
    const Card& c = (*cards)[static_cast<std::size_t>(m)];
    if (c.ok && c.addr.roce) lists[static_cast<std::size_t>(m)] = c.gids;
  }
  std::lock_guard<std::mutex> lock(pool->mutex());
  for (int m = 0; m < n; ++m) {
    bool matched = false;
    const int k = choose_gid(lists.data(), n, m, &matched);
    if (k < 0) continue;
    if (m == me) {
      pool->use_gid(k, matched);
      continue;
    }
    PortAddress& a = (*cards)[static_cast<std::size_t>(m)].addr;
    const GidCandidate& g = lists[static_cast<std::size_t>(m)].e[k];
    std::memcpy(a.gid, g.raw, sizeof a.gid);
  }
}

}  // namespace

Status RdmaLeaderTransport::create(GroupBootstrap& boot, const hier::StageAreas& areas,
                                   std::span<const int> first_rank, std::span<const int> peers,
                                   const NetOptions& opt,
                                   std::unique_ptr<RdmaLeaderTransport>* out,
                                   std::string* why) noexcept {
  out->reset();
  const int size = boot.size();
  const int me = boot.rank();
  std::unique_ptr<RdmaLeaderTransport> t;
  Card mine;
  std::vector<Card> cards;
  std::vector<Link> links, all_links;
  std::vector<std::uint32_t> all_ok;
  try {
    all_ok.resize(static_cast<std::size_t>(size));
    cards.resize(static_cast<std::size_t>(size));
    links.resize(static_cast<std::size_t>(size));
    all_links.resize(static_cast<std::size_t>(size) * static_cast<std::size_t>(size));
  } catch (...) {
    *why = "out of memory";
    return Status::create_failed;  // cannot take part: an out-of-memory job is lost anyway
  }
  EndpointPool* pool = open_pool(boot, opt, why);
  if (pool) {
    try {
      t.reset(new RdmaLeaderTransport(pool, areas, opt));
      t->first_rank_.assign(first_rank.begin(), first_rank.end());
      t->peers_.resize(static_cast<std::size_t>(size));
      t->pending_.reserve(t->peers_.size());  // post() never allocates
      std::lock_guard<std::mutex> lock(pool->mutex());
      const std::shared_ptr<Device>& dev = pool->device();
      bool ok = areas.bytes > 0;
      for (int p = 0; p < 2 && ok; ++p) {
        ok = MemoryRegion::create(dev, areas.in[p], areas.bytes, IBV_ACCESS_LOCAL_WRITE,
                                  &t->in_mr_[p]) == Status::ok &&
             MemoryRegion::create(dev, areas.out[p], areas.bytes,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                  &t->out_mr_[p]) == Status::ok;
      }
      if (ok) {
        t->slot_id_ = pool->add_slot(&t->slot_);
        mine.id = pool->self();
        mine.addr = dev->address();
        mine.slot = t->slot_id_;
        for (int p = 0; p < 2; ++p) {
          mine.out_addr[p] = reinterpret_cast<std::uintptr_t>(areas.out[p]);
          mine.rkey[p] = t->out_mr_[p]->rkey();
        }
        mine.out_bytes = areas.bytes;
        mine.gids = pool->gid_offer();
        mine.ok = 1;
      } else {
        *why = "registering the staging areas failed";
      }
    } catch (...) {
      *why = "out of memory";
    }
  }
  if (!boot.allgather(&mine, cards.data(), sizeof mine)) {
    *why = "set-up allgather failed";
    mine.ok = 0;
  }
  // Our end of every pair: an existing endpoint or a new one, announced to all.
  bool ok = mine.ok != 0;
  if (ok) choose_gids(pool, me, &cards);
  std::vector<int> created;
  if (ok) {
    std::lock_guard<std::mutex> lock(pool->mutex());
    for (int p : peers) {
      const Card& c = cards[static_cast<std::size_t>(p)];
      Link& l = links[static_cast<std::size_t>(p)];
      std::shared_ptr<Endpoint> ep;
      bool is_new = false;
      if (p < 0 || p >= size || p == me || !c.ok || c.addr.roce != mine.addr.roce ||
          pool->endpoint(c.id, &ep, &is_new) != Status::ok) {
        l.state = Link::Failed;
        if (ok) *why = c.ok ? "no queue pair to a partner leader" : "a partner leader has no RDMA";
        ok = false;
        continue;
      }
      Peer& peer = t->peers_[static_cast<std::size_t>(p)];
      for (int q = 0; q < 2; ++q) {
        peer.out_addr[q] = c.out_addr[q];
        peer.rkey[q] = c.rkey[q];
      }
      peer.out_bytes = c.out_bytes;
      peer.slot = c.slot;
      const std::uint32_t state = is_new          ? Link::New
                                  : ep->connected ? Link::Existing
                                                  : Link::Pending;
      l = Link{state, ep->qp->qpn(), ep->psn, ep->remote_qpn};
      peer.ep = std::move(ep);
      if (is_new) created.push_back(p);
    }
  }
  const bool links_ok =
      boot.allgather(links.data(), all_links.data(), links.size() * sizeof(Link));
  if (!links_ok) {
    if (ok) *why = "set-up allgather failed";
    ok = false;
  }
  // Every member decides alike (from all_links) whether a repair round follows.
  const bool repair = links_ok && needs_repair(all_links.data(), size);
  std::vector<char> repaired(static_cast<std::size_t>(size), 0);
  if (pool && mine.ok) {
    std::lock_guard<std::mutex> lock(pool->mutex());
    for (int p : peers) {
      if (p < 0 || p >= size) continue;
      Peer& peer = t->peers_[static_cast<std::size_t>(p)];
      if (!peer.ep) continue;
      const std::size_t i = static_cast<std::size_t>(p);
      const Link& m = links[i];
      const Link& r = all_links[i * static_cast<std::size_t>(size) + static_cast<std::size_t>(me)];
      if (repair && repairable(m, r)) {
        repaired[i] = 1;
        t->renew(cards[i].id, &peer, &links[i], &created);
        continue;
      }
      if (!t->settle(cards[i].id, cards[i].addr, m, r, ok, &peer, why)) ok = false;
    }
  }
  if (repair) {
    // The repair round: the replaced ends' new QPs, then both ends connect.
    if (!boot.allgather(links.data(), all_links.data(), links.size() * sizeof(Link))) {
      if (ok) *why = "set-up allgather failed";
      ok = false;
    } else if (pool && mine.ok) {
      std::lock_guard<std::mutex> lock(pool->mutex());
      for (int p : peers) {
        const std::size_t i = static_cast<std::size_t>(p);
        if (p < 0 || p >= size || !repaired[i]) continue;
        const Link& r = all_links[i * static_cast<std::size_t>(size) + static_cast<std::size_t>(me)];
        Peer& peer = t->peers_[i];
        if (!peer.ep) {
          if (ok) *why = "no queue pair to a partner leader";
          ok = false;
        } else if (!t->settle(cards[i].id, cards[i].addr, links[i], r, ok, &peer, why)) {
          ok = false;
        }
      }
    }
  }
  if (t) t->qps_created_ = static_cast<int>(created.size());
  // Third round: nobody writes before every partner's end is in RTR (a
  // write reaching a QP not yet in RTR is dropped, and the requester retries
  // only until its retry count runs out), and every leader learns whether
  // all set-ups worked.
  const std::uint32_t mine_ok = ok ? 1 : 0;
  if (!boot.allgather(&mine_ok, all_ok.data(), sizeof mine_ok)) {
    if (ok) *why = "set-up allgather failed";
    ok = false;
  }
  for (int p : peers) {
    if (ok && p >= 0 && p < size && all_ok[static_cast<std::size_t>(p)] == 0) {
      *why = "a partner leader's RDMA set-up failed";
      ok = false;
    }
  }
  if (!ok) return Status::unavailable;
  *out = std::move(t);
  return Status::ok;
}

bool RdmaLeaderTransport::settle(const ProcessId& id, const PortAddress& addr, const Link& m,
                                 const Link& r, bool report, Peer* peer,
                                 std::string* why) noexcept {
  switch (pair_action(m, r)) {
    case LinkAction::connect:
      if (pool_->connect(*peer->ep, addr, r.qpn, r.psn) == Status::ok) return true;
      *why = "connecting a queue pair failed";
      if (!peer->ep->connected) {  // dropped: both ends are made anew next time
        pool_->discard(id);
        peer->ep = nullptr;
      }
      return false;
    case LinkAction::use:
      return true;
    case LinkAction::leave:
      // Another team's set-up owns the pair on one end: only this team
      // falls back; the pair is left to that team.
      if (report) *why = "a queue pair to a partner is being set up by another team";
      return false;
    case LinkAction::discard:
      // A pair the two ends see differently is replaced at the next
      // set-up on both ends, so they converge.
      if (report) {
        *why = r.state == Link::Pending ? "a queue pair to a partner is being set up by another team"
                                        : "partners disagree on whether they are connected";
      }
      pool_->discard(id);
      peer->ep = nullptr;
      return false;
    case LinkAction::mark_failed:
      if (report) {
        *why = m.state == Link::Existing && r.state == Link::Existing
                   ? "a partner's queue pair is connected elsewhere"
                   : "partners disagree on whether they are connected";
      }
      peer->ep->failed = true;
      return false;
  }
  return false;
}

void RdmaLeaderTransport::renew(const ProcessId& id, Peer* peer, Link* link,
                                std::vector<int>* created) noexcept {
  if (link->state == Link::New) return;  // ours is fresh already
  const int p = static_cast<int>(peer - peers_.data());
  MLXA2A_LOG(Info, "RDMA: the queue pair %u to leader %d is replaced on both ends", link->qpn, p);
  pool_->discard(id);
  std::shared_ptr<Endpoint> ep;
  bool is_new = false;
  if (pool_->endpoint(id, &ep, &is_new) != Status::ok || !is_new) {
    link->state = Link::Failed;  // the partner drops its new end (LinkAction::discard)
    peer->ep = nullptr;
    return;
  }
  *link = Link{Link::New, ep->qp->qpn(), ep->psn, 0};
  peer->ep = std::move(ep);
  try {
    created->push_back(p);
  } catch (...) {  // only the count of created QPs is lost
  }
}

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

Status RdmaLeaderTransport::post(const Peer& peer, const hier::Message& m) noexcept {
  const int par = m.parity & 1;
  const char* in = areas_.in[par];
  if (m.send < in || m.send + m.bytes > in + areas_.bytes ||
      m.remote_offset + m.bytes > peer.out_bytes || m.bytes > kPiece * kMaxPieces) {
    return Status::invalid_argument;
  }
  ibv_sge sge[kMaxPieces];
  ibv_send_wr wr[kMaxPieces];
  int n = 0;
  // A message of 0 bytes (a check call's, core/hier/transport.h) is one
  // write with immediate of length 0: the partner counts its arrival as any.
  for (std::size_t at = 0; at == 0 || at < m.bytes; at += kPiece, ++n) {
    const std::size_t len = m.bytes - at < kPiece ? m.bytes - at : kPiece;
    const bool last = at + len == m.bytes;
    sge[n] = {reinterpret_cast<std::uintptr_t>(m.send + at), static_cast<std::uint32_t>(len),
              in_mr_[par]->lkey()};
    wr[n] = {};
    wr[n].wr_id = static_cast<std::uint64_t>(slot_id_) << 1;
    // No SGE for 0 bytes: a 0-length SGE means 2 GiB to some HCAs.
    wr[n].sg_list = len != 0 ? &sge[n] : nullptr;
    wr[n].num_sge = len != 0 ? 1 : 0;
    // Only the last piece carries the immediate (the arrival) and asks for
    // a completion: RC executes a QP's WRs in order, and polling a later
    // signalled completion retires the unsignalled ones before it.
    wr[n].opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr[n].send_flags = last ? IBV_SEND_SIGNALED : 0;
    if (len != 0 && len <= peer.ep->qp->inline_bytes()) wr[n].send_flags |= IBV_SEND_INLINE;
    wr[n].imm_data = htonl((peer.slot << 1) | static_cast<std::uint32_t>(par));
    wr[n].wr.rdma.remote_addr = peer.out_addr[par] + m.remote_offset + at;
    wr[n].wr.rdma.rkey = peer.rkey[par];
    if (n > 0) wr[n - 1].next = &wr[n];
  }
  ibv_send_wr* first = wr;
  ibv_sge head_sge;
  ibv_send_wr head_wr;
  if (m.head_send) {
    if (!header_wr(m, in, areas_.bytes, in_mr_[par]->lkey(), peer.out_addr[par], peer.rkey[par],
                   peer.out_bytes, peer.ep->qp->inline_bytes(), &head_sge, &head_wr, wr)) {
      return Status::invalid_argument;
    }
    first = &head_wr;
  }
  if (const std::uint32_t wrs = static_cast<std::uint32_t>(n) + (m.head_send ? 1 : 0);
      !peer.ep->take_send(wrs)) {
    if (const Status st = send_credits(*peer.ep, wrs); st != Status::ok) return st;
  }
  ibv_send_wr* bad = nullptr;
  if (Verbs::post_send(peer.ep->qp->get(), first, &bad) != 0) return Status::net_failed;
  // The header's write is not counted: writes_posted counts the data's.
  EndpointPool::count_writes(static_cast<std::uint64_t>(n), m.bytes);
  return Status::ok;
}

Status RdmaLeaderTransport::send_credits(Endpoint& ep, std::uint32_t wrs) noexcept {
  if (wrs > ep.qp->send_depth()) return Status::invalid_argument;  // set-up rules it out
  // Other teams' messages fill the shared send queue: their completions,
  // polled here for everyone, free it. The HCA needs no help from us, so
  // spinning with the pool's mutex held is bounded like any wait.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (unsigned i = 1;; ++i) {
    if (pool_->poll() != Status::ok || ep.failed) return Status::net_failed;
    if (ep.take_send(wrs)) return Status::ok;
    if ((i & 1023) == 0) {
      pool_->check_events();
      if (Clock::now() - start >= std::chrono::milliseconds(opt_.timeout_ms)) {
        MLXA2A_LOG(Warn, "RDMA: no send queue space within %u ms", opt_.timeout_ms);
        return Status::timeout;
      }
    }
    cpu_relax();
  }
}

std::uint32_t RdmaLeaderTransport::gather_sge() const noexcept {
  std::uint32_t n = 0;
  for (const Peer& p : peers_) {
    if (p.ep && (n == 0 || p.ep->qp->send_sge() < n)) n = p.ep->qp->send_sge();
  }
  return n == 0 ? 1 : n;
}

Status RdmaLeaderTransport::post_gather(const Peer& peer, const hier::Message& m) noexcept {
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
    split_wrs(sges_, peer.ep->qp->send_sge(), kPiece, &spans_);
    if (spans_.size() > kMaxGatherWrs) return Status::invalid_argument;  // set-up rules it out
    wrs_.assign(spans_.size(), ibv_send_wr{});
  } catch (...) {  // allocation only
    return Status::net_failed;
  }
  for (std::size_t w = 0; w < spans_.size(); ++w) {
    const bool last = w + 1 == spans_.size();
    ibv_send_wr& wr = wrs_[w];
    wr.wr_id = static_cast<std::uint64_t>(slot_id_) << 1;
    wr.sg_list = &sges_[spans_[w].first_sge];
    wr.num_sge = static_cast<int>(spans_[w].num_sge);
    // As post(): the last WR carries the arrival and the one completion.
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    wr.imm_data = htonl((peer.slot << 1) | static_cast<std::uint32_t>(par));
    wr.wr.rdma.remote_addr = peer.out_addr[par] + m.remote_offset + spans_[w].offset;
    wr.wr.rdma.rkey = peer.rkey[par];
    wr.next = last ? nullptr : &wrs_[w + 1];
  }
  ibv_send_wr* first = wrs_.data();
  ibv_sge head_sge;
  ibv_send_wr head_wr;
  if (m.head_send) {
    if (!header_wr(m, in, areas_.bytes, in_mr_[par]->lkey(), peer.out_addr[par], peer.rkey[par],
                   peer.out_bytes, peer.ep->qp->inline_bytes(), &head_sge, &head_wr, first)) {
      return Status::invalid_argument;
    }
    first = &head_wr;
  }
  if (const std::uint32_t wrs = static_cast<std::uint32_t>(spans_.size()) + (m.head_send ? 1 : 0);
      !peer.ep->take_send(wrs)) {
    if (const Status st = send_credits(*peer.ep, wrs); st != Status::ok) return st;
  }
  ibv_send_wr* bad = nullptr;
  if (Verbs::post_send(peer.ep->qp->get(), first, &bad) != 0) return Status::net_failed;
  EndpointPool::count_writes(spans_.size(), m.bytes);
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
    if (peers_[r].ep->failed) {
      // In error, or discarded and replaced by a later set-up (another
      // team's): this team stops here and falls back.
      MLXA2A_LOG(Warn, "RDMA: the queue pair to node %d failed; the team falls back", m.node);
      return fail(Status::net_failed);
    }
    if (const Status st = m.gather ? post_gather(peers_[r], m) : post(peers_[r], m);
        st != Status::ok) {
      MLXA2A_LOG(Warn, "RDMA: posting a write to node %d failed", m.node);
      return fail(st);
    }
    pending_.push_back(&peers_[r]);
  }
  expect_arrived_[par] += messages.size();
  expect_sent_ += messages.size();
  pending_parity_ = par;
  return Status::ok;
}

Status RdmaLeaderTransport::complete() noexcept {
  if (broken_) return Status::net_failed;
  if (pending_.empty()) return Status::ok;
  const int par = pending_parity_;
  // Arrivals for the other parity may come in meanwhile (a partner one round
  // ahead); they are counted in their own counter (docs/hier.md).
  std::unique_lock<std::mutex> lock(pool_->mutex());
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const core::wait_cpu::Scope accounted;  // MLXA2A_COLL_STATS: CPU spent waiting
  // Poll without yielding for as long as recent exchanges took (NetSpin);
  // the clock is read every 16 polls (a poll is ~50 ns, a clock read ~25).
  const std::uint64_t budget = spin_.budget_ns();
  auto waited_ns = [&] {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
  };
  bool spinning = true;
  for (unsigned i = 0;; ++i) {
    if (pool_->poll() != Status::ok || slot_.failed) return fail_pending(Status::net_failed);
    if (slot_.arrived[par] >= expect_arrived_[par] && slot_.sent >= expect_sent_) {
      spin_.observe(waited_ns());
      pending_.clear();
      return Status::ok;
    }
    for (const Peer* p : pending_) {
      if (p->ep->failed) return fail_pending(Status::net_failed);
    }
    if (spinning && ((i & 15) != 15 || waited_ns() < budget)) {
      cpu_relax();
      continue;
    }
    spinning = false;
    lock.unlock();
    sched_yield();
    if ((i & 63) == 0) {
      if (opt_.idle) opt_.idle();
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      if (waited.count() >= static_cast<long>(opt_.timeout_ms)) {
        MLXA2A_LOG(Warn, "RDMA: no arrival from a partner leader within %u ms",
                   opt_.timeout_ms);
        lock.lock();
        return fail_pending(Status::timeout);
      }
    }
    lock.lock();
    // A port that went down or a QP the HCA failed shows here long before
    // the retries run out; the endpoints it names are failed (above).
    if ((i & 63) == 0) pool_->check_events();
  }
}

}  // namespace mlxa2a::mlx5
