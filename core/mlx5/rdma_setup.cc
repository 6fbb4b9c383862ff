// RdmaLeaderTransport::create: the leaders' collective set-up, as its steps
// (core/collective_setup.h): every leader runs every round whatever failed
// before, so that nobody skips an allgather its partners are in.
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "core/collective_setup.h"
#include "core/log.h"
#include "core/mlx5/gid_choice.h"
#include "core/mlx5/link_layer.h"
#include "core/mlx5/link_rule.h"
#include "core/mlx5/qp_budget.h"
#include "core/mlx5/rdma_transport.h"
#include "core/mlx5/setup_card.h"

namespace mlxa2a::mlx5 {

namespace {

// This build's card format, or MLXA2A_DEBUG_CARD_FORMAT's: tests make one
// leader claim another format to see the mismatch refused (setup_card.h).
std::uint32_t card_format(const NetOptions& opt) noexcept {
  return opt.debug_card_format != 0 ? opt.debug_card_format : kCardFormat;
}

// Round 0: each leader's build (magic, card format) and the link layers and
// InfiniBand subnets its ports offer. Leaders of another format are refused
// before any round whose layout could differ (*mismatch: then no later round
// runs, on any leader of this build: all saw the same preambles). Otherwise
// the team takes a link layer all leaders have (link_layer.h), so no leader
// opens a port the other nodes cannot reach, and every leader prefers a port
// on the team's common subnet (rail_subnet). Collective: one allgather
// whatever happens.
EndpointPool* open_pool(GroupBootstrap& boot, const NetOptions& opt,
                        std::span<const int> first_rank, std::string* why,
                        bool* mismatch) noexcept {
  const PortOffer ports = EndpointPool::port_offer(opt);
  const std::uint32_t offer = ports.links;
  const Preamble mine = make_preamble(ports, card_format(opt));
  std::vector<Preamble> all;
  std::vector<std::uint32_t> offers;
  try {
    all.resize(static_cast<std::size_t>(boot.size()));
    offers.resize(all.size());
  } catch (...) {
    all.clear();
  }
  const bool got = !all.empty() && boot.allgather(&mine, all.data(), sizeof mine);
  if (got && format_mismatch(all, boot.rank(), first_rank, why) >= 0) {
    *mismatch = true;
    MLXA2A_LOG(Warn, "RDMA: %s; the leaders exchange over PMPI", why->c_str());
    return nullptr;
  }
  if (offer == 0) return EndpointPool::get(opt, why);  // says why this process has no RDMA
  if (!got) {
    *why = "set-up allgather failed";
    return nullptr;
  }
  for (std::size_t m = 0; m < all.size(); ++m) offers[m] = all[m].offer.links;
  NetOptions net = opt;
  net.link_layers = agree_link_layer(offers.data(), boot.size());
  net.ib_subnet = rail_subnet(all);
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

// An out-area's registration (issue 39, item 6): with
// IBV_ACCESS_RELAXED_ORDERING when `relaxed` (the HCA may then reorder its
// PCIe writes into the area; safe here, as every reader waits for the
// write's immediate, whose completion the HCA writes only after the data),
// again without it if the device or stack refuses the flag. rdma-core treats
// it as optional: a kernel or device without support drops it silently, so
// "on" means taken, not proven in effect (UCX's mlx5 MD asks the HCA's
// capabilities through DevX instead; docs/hier-transports.md). *state: "on",
// "refused" or "off"; false if the registration failed without the flag too.
bool register_out_area(const std::shared_ptr<Device>& dev, void* addr, std::size_t bytes,
                       bool relaxed, std::unique_ptr<MemoryRegion>* mr, const char** state) {
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (relaxed) {
    if (MemoryRegion::create(dev, addr, bytes, kAccess | IBV_ACCESS_RELAXED_ORDERING, mr) ==
        Status::ok) {
      *state = "on";
      return true;
    }
    *state = "refused";
    MLXA2A_LOG(Info, "RDMA: the device refused IBV_ACCESS_RELAXED_ORDERING; out-areas are "
               "registered without it");
  }
  return MemoryRegion::create(dev, addr, bytes, kAccess, mr) == Status::ok;
}

// Which GID each RoCE member uses, the same on every member (gid_choice.h):
// ours is applied to the pool (once, and only when it shares a subnet with
// every other member: a GID fixed on no common subnet would keep this process
// from later teams that have one), the partners' replace their cards'
// addresses, so both ends of every pair agree. chosen[m]: member m's GID with
// its subnet, for the reachability check.
void choose_gids(EndpointPool* pool, int me, std::vector<Card>* cards,
                 std::vector<GidCandidate>* chosen) noexcept {
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
    const GidCandidate& g = lists[static_cast<std::size_t>(m)].e[k];
    (*chosen)[static_cast<std::size_t>(m)] = g;
    if (m == me) {
      if (matched) pool->use_gid(k);
      continue;
    }
    PortAddress& a = (*cards)[static_cast<std::size_t>(m)].addr;
    std::memcpy(a.gid, g.raw, sizeof a.gid);
  }
}

// What our end of a pair says of itself: QP 0 names the pair, the others
// ride along (MLXA2A_NET_STRIPES).
Link link_of(std::uint32_t state, Endpoint& ep) noexcept {
  Link l{state, ep.qp->qpn(), ep.psn, ep.remote_qpn};
  static_assert(EndpointPool::kMaxStripes == Link::kMaxLanes + 1);
  l.stripes = ep.stripes();
  for (std::uint32_t s = 1; s < ep.stripes(); ++s) {
    l.lane_qpn[s - 1] = ep.lane(s).qp->qpn();
    l.lane_psn[s - 1] = ep.lane(s).psn;
  }
  return l;
}

}  // namespace

// create()'s state, handed from step to step (this leader's view).
struct RdmaLeaderTransport::Setup {
  Setup(GroupBootstrap& b, const hier::StageAreas& a, std::span<const int> f,
        std::span<const int> p, const NetOptions& o)
      : boot(b), areas(a), first_rank(f), peers(p), opt(o), size(b.size()), me(b.rank()) {
    const std::size_t n = static_cast<std::size_t>(size);
    all_ok.resize(n);
    cards.resize(n);
    chosen.resize(n);
    links.resize(n);
    their_links.resize(n);
    repaired.resize(n);
  }
  GroupBootstrap& boot;
  const hier::StageAreas& areas;
  std::span<const int> first_rank;
  std::span<const int> peers;
  const NetOptions& opt;
  const int size, me;
  CollectiveSetup steps{Status::unavailable};
  EndpointPool* pool = nullptr;
  std::unique_ptr<RdmaLeaderTransport> t;
  Card mine;  // mine.ok: our card is out, so we act on the pairs
  std::vector<Card> cards;
  std::vector<GidCandidate> chosen;  // RoCE: the GID each member uses (choose_gids)
  // Another leader runs another card format: no later round runs (their
  // sizes may differ), on every leader of this build alike.
  bool mismatch = false;
  // Per member: our end of the pair, and its end of it (what it said to us).
  std::vector<Link> links, their_links;
  std::vector<std::uint32_t> all_ok;
  std::vector<char> repaired;  // per member: its pair is renewed in the repair round
  std::vector<int> created;    // members we made a new QP for
  bool repair = false;         // the same on every member (agree_repair)
  // RC would take this process past its QP budget (qp_budget.h): it makes no
  // QP, and every member hears it in agree_repair's round.
  bool over_budget = false;
  bool team_over_budget = false;  // some member is (agree_repair), the same on all

  bool is_member(int p) const { return p >= 0 && p < size; }
  // What member i's end says about its pair with us.
  const Link& theirs(std::size_t i) const { return their_links[i]; }
  // An allgather of the later rounds; false (without communicating) after a
  // format mismatch.
  bool gather(const void* mine_bytes, void* all, std::size_t len) {
    return !mismatch && boot.allgather(mine_bytes, all, len);
  }
  // Each pair's ends, told pairwise: O(size) per leader (an allgather of
  // every member's links was size x size).
  bool exchange_links() {
    return !mismatch && boot.alltoall(links.data(), their_links.data(), sizeof(Link));
  }
  bool agree_repair();
  void open();
  void register_areas();
  bool reaches(int p, std::string* why) const;
  bool within_budget();
  void publish_cards();
  void claim_ends();
  void publish_links();
  void settle_ends();
  void repair_round();
  void hear_partners();
  void settle_end(std::size_t i, const Link& mine_link);
};

Status RdmaLeaderTransport::create(GroupBootstrap& boot, const hier::StageAreas& areas,
                                   std::span<const int> first_rank, std::span<const int> peers,
                                   const NetOptions& opt,
                                   std::unique_ptr<RdmaLeaderTransport>* out,
                                   std::string* why, bool* over_budget) noexcept {
  out->reset();
  CountingBootstrap counted(boot);
  std::optional<Setup> st;
  try {
    st.emplace(counted, areas, first_rank, peers, opt);
  } catch (...) {
    *why = "out of memory";
    return Status::create_failed;  // cannot take part: an out-of-memory job is lost anyway
  }
  Setup& s = *st;
  s.steps.step([&] { s.open(); })  // round 0: a link layer all leaders have
      .step([&] { s.register_areas(); })
      .step([&] { s.publish_cards(); })  // round 1: addresses and keys
      .step([&] { s.claim_ends(); })     // our end of every pair
      .step([&] { s.publish_links(); })  // round 2: every end's state
      .step([&] { s.settle_ends(); })
      .step([&] { s.repair_round(); })    // when agree_repair() says so
      .step([&] { s.hear_partners(); });  // round 3: all in RTR, and how it went
  EndpointPool::count_setup(counted.bytes(), counted.collectives());
  if (s.t) s.t->setup_bytes_ = counted.bytes();
  if (over_budget) *over_budget = s.team_over_budget;
  if (const SetupOutcome& o = s.steps.outcome(); !o.ok()) {
    if (!o.why.empty()) *why = o.why;
    return o.status;
  }
  *out = std::move(s.t);
  return Status::ok;
}

void RdmaLeaderTransport::Setup::open() {
  std::string why;
  pool = open_pool(boot, opt, first_rank, &why, &mismatch);
  if (!pool) steps.fail(Status::unavailable, why);
}

// The transport, its areas registered (in: local reads, out: remote
// writes), and the card this leader publishes.
void RdmaLeaderTransport::Setup::register_areas() {
  if (!pool) return;
  {
    // Pending async events first: the card must carry the port's address
    // as it is now (a LID/GID change), and a port that is down refuses.
    std::lock_guard<std::mutex> lock(pool->mutex());
    std::string why;
    if (const Status st = pool->ready(&why); st != Status::ok) {
      steps.fail(Status::unavailable, why);
      return;
    }
  }
  t.reset(new RdmaLeaderTransport(pool, areas, opt));
  t->first_rank_.assign(first_rank.begin(), first_rank.end());
  t->peers_.resize(static_cast<std::size_t>(size));
  t->pending_.reserve(t->peers_.size());  // post() never allocates
  std::lock_guard<std::mutex> lock(pool->mutex());
  const std::shared_ptr<Device>& dev = pool->device();
  bool ok = areas.bytes > 0;
  const char* relaxed = "off";
  for (int p = 0; p < 2 && ok; ++p) {
    ok = MemoryRegion::create(dev, areas.in[p], areas.bytes, IBV_ACCESS_LOCAL_WRITE,
                              &t->in_mr_[p]) == Status::ok &&
         register_out_area(dev, areas.out[p], areas.bytes, opt.relaxed_ordering,
                           &t->out_mr_[p], &relaxed);
  }
  if (ok) pool->note_registration(relaxed, areas.pages);
  if (!ok) {
    steps.fail(Status::unavailable, "registering the staging areas failed");
    return;
  }
  if (static_cast<std::uint32_t>(size) > wire::kMaxMembers) {
    steps.fail(Status::unavailable, "more leaders than an immediate can name (65,536)");
    return;
  }
  t->me_ = static_cast<std::uint32_t>(me);
  for (CounterRow& v : t->slot_.from) v.reset(static_cast<std::size_t>(size));
  for (CounterRow& v : t->slot_.stripes_from) v.reset(static_cast<std::size_t>(size));
  t->slot_.sent_to.reset(static_cast<std::size_t>(size));
  t->slot_.stripes_done.reset(static_cast<std::size_t>(size));
  t->slot_id_ = pool->add_slot(&t->slot_);
  if (t->slot_id_ == 0) {
    steps.fail(Status::unavailable, "every RDMA team slot of this process is taken (16,383)");
    return;
  }
  mine.id = pool->self();
  mine.addr = dev->address();
  mine.slot = t->slot_id_;
  for (int p = 0; p < 2; ++p) {
    mine.out_addr[p] = reinterpret_cast<std::uintptr_t>(areas.out[p]);
    mine.rkey[p] = t->out_mr_[p]->rkey();
  }
  mine.out_bytes = areas.bytes;
  mine.gids = pool->gid_offer();
  std::snprintf(mine.hca, sizeof mine.hca, "%s", dev->name().c_str());
  mine.ok = 1;
}

void RdmaLeaderTransport::Setup::publish_cards() {
  if (!gather(&mine, cards.data(), sizeof mine)) {
    steps.fail(Status::unavailable, "set-up allgather failed");
    mine.ok = 0;
  }
}

// Our end of every pair: an existing endpoint or a new one, announced to all.
void RdmaLeaderTransport::Setup::claim_ends() {
  if (!mine.ok) return;
  choose_gids(pool, me, &cards, &chosen);
  std::lock_guard<std::mutex> lock(pool->mutex());
  if (!within_budget()) {
    for (int p : peers) {
      if (is_member(p)) links[static_cast<std::size_t>(p)].state = Link::Failed;
    }
    return;
  }
  for (int p : peers) {
    if (!is_member(p)) {  // the caller's plan names members only; never index outside
      steps.fail(Status::unavailable, "a partner leader is not in the leaders' group");
      continue;
    }
    const Card& c = cards[static_cast<std::size_t>(p)];
    Link& l = links[static_cast<std::size_t>(p)];
    std::shared_ptr<Endpoint> ep;
    bool is_new = false;
    std::string why;
    if (p != me && c.ok && !reaches(p, &why)) {
      l.state = Link::Failed;  // the partner finds the same (reachable() is symmetric)
      MLXA2A_LOG(Warn, "RDMA: %s; the leaders exchange over PMPI", why.c_str());
      steps.fail(Status::unavailable, why);
      continue;
    }
    if (p == me || !c.ok || pool->endpoint(c.id, &ep, &is_new) != Status::ok) {
      l.state = Link::Failed;
      steps.fail(Status::unavailable,
                 c.ok ? "no queue pair to a partner leader" : "a partner leader has no RDMA");
      continue;
    }
    Peer& peer = t->peers_[static_cast<std::size_t>(p)];
    for (int q = 0; q < 2; ++q) {
      peer.out_addr[q] = c.out_addr[q];
      peer.rkey[q] = c.rkey[q];
    }
    peer.out_bytes = c.out_bytes;
    peer.slot = c.slot;
    peer.member = static_cast<std::uint32_t>(p);
    const std::uint32_t state = is_new          ? Link::New
                                : ep->connected ? Link::Existing
                                                : Link::Pending;
    l = link_of(state, *ep);
    peer.ep = std::move(ep);
    if (is_new) created.push_back(p);
  }
}

// Whether the QPs this process holds plus those this set-up would add stay
// within its RC QP budget (qp_budget.h). Pool mutex held.
bool RdmaLeaderTransport::Setup::within_budget() {
  std::uint64_t needed = pool->endpoint_count();
  for (int p : peers) {
    if (is_member(p) && p != me && cards[static_cast<std::size_t>(p)].ok &&
        !pool->has_endpoint(cards[static_cast<std::size_t>(p)].id)) {
      needed += pool->stripes();  // a pair's QPs (MLXA2A_NET_STRIPES)
    }
  }
  const QpBudget budget = rc_qp_budget(opt.rc_qp_budget,
                                       pool->device()->attr().max_qp, opt.ranks_per_node);
  std::string why;
  if (!rc_over_budget(needed, budget, &why)) return true;
  over_budget = true;
  MLXA2A_LOG(Info, "RDMA: %s: no RC for this team", why.c_str());
  steps.fail(Status::unavailable, why);
  return false;
}

// Whether partner p's port is reachable from ours (setup_card.h).
bool RdmaLeaderTransport::Setup::reaches(int p, std::string* why) const {
  const std::size_t i = static_cast<std::size_t>(p);
  const PortView ours{&mine, chosen[static_cast<std::size_t>(me)]};
  const PortView theirs{&cards[i], chosen[i]};
  return reachable(ours, theirs, node_of_member(first_rank, p), why);
}

void RdmaLeaderTransport::Setup::publish_links() {
  // Both collectives whatever happens: the other members make them.
  if (!exchange_links()) steps.fail(Status::unavailable, "set-up alltoall failed");
  if (!agree_repair()) steps.fail(Status::unavailable, "set-up allgather failed");
}

// Whether a repair round follows, alike on every member: each says whether
// one of its pairs needs it (both ends of a pair see the same two links),
// and one word per member goes round.
bool RdmaLeaderTransport::Setup::agree_repair() {
  // Bit 0: a pair of ours needs repair; bit 1: we are over our RC QP budget,
  // so nobody uses RC (the team falls back alike, with this reason).
  std::uint32_t mine_flag = over_budget ? 2u : 0u;
  for (std::size_t i = 0; i < links.size(); ++i) {
    mine_flag |= repairable(links[i], their_links[i]) ? 1u : 0u;
  }
  std::vector<std::uint32_t> flags(static_cast<std::size_t>(size));
  if (!gather(&mine_flag, flags.data(), sizeof mine_flag)) return false;
  for (std::size_t m = 0; m < flags.size(); ++m) {
    repair = repair || (flags[m] & 1u) != 0;
    team_over_budget = team_over_budget || (flags[m] & 2u) != 0;
    if ((flags[m] & 2u) != 0 && !over_budget) {
      steps.fail(Status::unavailable, "leader " + std::to_string(m) +
                                          " is over its RC queue-pair budget "
                                          "(MLXA2A_NET_RC_QP_BUDGET)");
    }
  }
  return true;
}

// Connect, keep or drop each pair as both ends' links say (link_rule.h); the
// pairs the repair round renews get their new QP instead.
void RdmaLeaderTransport::Setup::settle_ends() {
  if (!mine.ok) return;
  std::lock_guard<std::mutex> lock(pool->mutex());
  for (int p : peers) {
    if (!is_member(p)) continue;
    const std::size_t i = static_cast<std::size_t>(p);
    Peer& peer = t->peers_[i];
    if (!peer.ep) continue;
    if (team_over_budget) {  // nobody uses RC in this team: its new QPs go, on both ends
      if (links[i].state == Link::New) {
        pool->discard(cards[i].id);
        peer.ep = nullptr;
      }
      continue;
    }
    if (repair && repairable(links[i], theirs(i))) {
      repaired[i] = 1;
      t->renew(cards[i].id, &peer, &links[i], &created);
      continue;
    }
    settle_end(i, links[i]);
  }
}

void RdmaLeaderTransport::Setup::settle_end(std::size_t i, const Link& mine_link) {
  std::string why;
  if (const Status st =
          t->settle(cards[i].id, cards[i].addr, mine_link, theirs(i), &t->peers_[i], &why);
      st != Status::ok) {
    steps.fail(st, why);
  }
}

// The repair round: the replaced ends' new QPs, then both ends connect.
void RdmaLeaderTransport::Setup::repair_round() {
  if (!repair) return;
  if (!exchange_links()) {
    steps.fail(Status::unavailable, "set-up alltoall failed");
    return;
  }
  if (!mine.ok) return;
  std::lock_guard<std::mutex> lock(pool->mutex());
  for (int p : peers) {
    const std::size_t i = static_cast<std::size_t>(p);
    if (!is_member(p) || !repaired[i]) continue;
    if (!t->peers_[i].ep) {
      steps.fail(Status::unavailable, "no queue pair to a partner leader");
    } else {
      settle_end(i, links[i]);
    }
  }
}

// Nobody writes before every partner's end is in RTR (a write reaching a QP
// not yet in RTR is dropped, and the requester retries only until its retry
// count runs out), and every leader learns whether its partners' set-ups
// worked. Not an agreement of the team's: the caller makes that one.
void RdmaLeaderTransport::Setup::hear_partners() {
  if (t) {
    t->qps_created_ = static_cast<int>(created.size());
    for (Peer& p : t->peers_) {  // its endpoint is settled: striped if it has more QPs
      if (p.ep && !p.ep->lanes.empty()) p.stripe_min = opt.stripe_min;
    }
  }
  const std::uint32_t mine_ok = steps.failed_here() ? 0 : 1;
  if (!gather(&mine_ok, all_ok.data(), sizeof mine_ok)) {
    steps.fail(Status::unavailable, "set-up allgather failed");
    return;
  }
  for (int p : peers) {
    if (is_member(p) && all_ok[static_cast<std::size_t>(p)] == 0) {
      // As the partner's own failure: the team's agreement takes the
      // partner's status, and contended is retried only if no leader failed
      // otherwise.
      steps.fail(Status::contended, "a partner leader's RDMA set-up failed");
    }
  }
}

Status RdmaLeaderTransport::settle(const ProcessId& id, const PortAddress& addr, const Link& m,
                                 const Link& r, Peer* peer, std::string* why) noexcept {
  switch (pair_action(m, r)) {
    case LinkAction::connect: {
      std::uint32_t qpns[EndpointPool::kMaxStripes] = {r.qpn};
      std::uint32_t psns[EndpointPool::kMaxStripes] = {r.psn};
      for (std::uint32_t s = 1; s < r.stripes && s < EndpointPool::kMaxStripes; ++s) {
        qpns[s] = r.lane_qpn[s - 1];
        psns[s] = r.lane_psn[s - 1];
      }
      if (r.stripes == m.stripes && pool_->connect(*peer->ep, addr, qpns, psns) == Status::ok) {
        return Status::ok;
      }
      *why = r.stripes == m.stripes ? "connecting a queue pair failed"
                                    : "partner leaders differ in MLXA2A_NET_STRIPES";
      if (!peer->ep->connected) {  // dropped: both ends are made anew next time
        pool_->discard(id);
        peer->ep = nullptr;
      }
      return Status::unavailable;
    }
    case LinkAction::use:
      return Status::ok;
    case LinkAction::leave:
      // Another team's set-up owns the pair on one end: only this team
      // falls back; the pair is left to that team.
      *why = "a queue pair to a partner is being set up by another team";
      return Status::contended;
    case LinkAction::discard:
      // A pair the two ends see differently is replaced at the next
      // set-up on both ends, so they converge.
      *why = r.state == Link::Pending ? "a queue pair to a partner is being set up by another team"
                                      : "partners disagree on whether they are connected";
      pool_->discard(id);
      peer->ep = nullptr;
      return Status::contended;
    case LinkAction::mark_failed:
      *why = m.state == Link::Existing && r.state == Link::Existing
                 ? "a partner's queue pair is connected elsewhere"
                 : "partners disagree on whether they are connected";
      peer->ep->failed = true;
      return Status::contended;  // replaced at the next set-up, on both ends
  }
  return Status::unavailable;
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
  *link = link_of(Link::New, *ep);
  peer->ep = std::move(ep);
  try {
    created->push_back(p);
  } catch (...) {  // only the count of created QPs is lost
  }
}

}  // namespace mlxa2a::mlx5
