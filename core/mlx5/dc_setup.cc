// DcLeaderTransport::create: the leaders' collective DC set-up, as steps
// (core/collective_setup.h): every leader runs both allgathers whatever
// failed before, so nobody is left in one.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>

#include "core/collective_setup.h"
#include "core/log.h"
#include "core/mlx5/dc_transport.h"
#include "core/mlx5/endpoint_pool.h"

namespace mlxa2a::mlx5 {

namespace {

// What a leader publishes: how its DCT is reached, its key, its out-areas.
struct DcCard {
  std::uint32_t ok = 0;
  std::uint32_t dctn = 0;
  std::uint64_t key = 0;
  std::uint8_t gid[16] = {};
  std::uint16_t lid = 0;
  std::uint16_t pad[3] = {};
  std::uint64_t out_addr[2] = {0, 0};
  std::uint32_t rkey[2] = {0, 0};
  std::uint64_t out_bytes = 0;
};

// The address vector of our port towards `card`'s (or of our own, for a QP's
// RTR: no destination then).
ibv_ah_attr av(const Device& dev, const DcCard* card) {
  ibv_ah_attr a{};
  const PortAddress& me = dev.address();
  a.port_num = dev.port();
  a.sl = dev.qos().service_level;
  if (me.roce) {
    a.is_global = 1;
    if (card) std::memcpy(a.grh.dgid.raw, card->gid, sizeof card->gid);
    a.grh.sgid_index = static_cast<std::uint8_t>(me.gid_index);
    a.grh.hop_limit = 64;
    a.grh.traffic_class = dev.qos().traffic_class;
  } else if (card) {
    a.dlid = card->lid;
  }
  return a;
}

VerbsPtr<ibv_qp> make_dc_qp(const Device& dev, ibv_cq* cq, ibv_srq* srq, bool dct,
                            std::uint64_t key) {
  const Verbs& v = dev.verbs();
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_DRIVER;
  ia.send_cq = ia.recv_cq = cq;
  ia.pd = dev.pd();
  ia.comp_mask = IBV_QP_INIT_ATTR_PD;
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
  if (dct) {
    ia.srq = srq;
    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
    dv.dc_init_attr.dct_access_key = key;
  } else {
    ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    ia.cap.max_send_wr = DcLeaderTransport::kDciDepth;
    ia.cap.max_send_sge = 1;
    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
  }
  return VerbsPtr<ibv_qp>(v.dv_create_qp(dev.context(), &ia, &dv),
                          VerbsDeleter<ibv_qp>{v.destroy_qp, "ibv_destroy_qp(DC)"});
}

// RESET -> INIT -> RTR (a DCT stays there) -> RTS (a DCI).
bool bring_up(const Device& dev, ibv_qp* qp, bool dct, const NetOptions& opt) {
  const Verbs& v = dev.verbs();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = dev.qos().pkey_index;
  a.port_num = dev.port();
  a.qp_access_flags = dct ? IBV_ACCESS_REMOTE_WRITE : 0;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (dct ? IBV_QP_ACCESS_FLAGS : 0);
  if (v.modify_qp(qp, &a, mask) != 0) return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(dev.address().mtu);
  a.min_rnr_timer = 12;  // as RC's (resources.cc)
  a.ah_attr = av(dev, nullptr);
  mask = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV | (dct ? IBV_QP_MIN_RNR_TIMER : 0);
  if (v.modify_qp(qp, &a, mask) != 0) return false;
  if (dct) return true;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = opt.qp_timeout;
  a.retry_cnt = opt.retry_count;
  a.rnr_retry = 6;  // finite, as RC's
  a.max_rd_atomic = 1;
  return v.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

}  // namespace

struct DcLeaderTransport::Setup {
  Setup(GroupBootstrap& b, const hier::StageAreas& a, std::span<const int> f,
        std::span<const int> p, const NetOptions& o)
      : boot(b), areas(a), first_rank(f), peers(p), opt(o), cards(static_cast<std::size_t>(b.size())) {}
  GroupBootstrap& boot;
  const hier::StageAreas& areas;
  std::span<const int> first_rank;
  std::span<const int> peers;
  const NetOptions& opt;
  CollectiveSetup steps{Status::unavailable};
  std::unique_ptr<DcLeaderTransport> t;
  DcCard mine;
  std::vector<DcCard> cards;

  void open();
  bool make_queues(DcLeaderTransport& t);
  bool register_areas(DcLeaderTransport& t);
  void publish();
  void address_partners();
  void hear_partners();
};

Status DcLeaderTransport::create(GroupBootstrap& boot, const hier::StageAreas& areas,
                                 std::span<const int> first_rank, std::span<const int> peers,
                                 const NetOptions& opt, std::unique_ptr<DcLeaderTransport>* out,
                                 std::string* why) noexcept {
  out->reset();
  CountingBootstrap counted(boot);
  std::optional<Setup> st;
  try {
    st.emplace(counted, areas, first_rank, peers, opt);
  } catch (...) {
    *why = "out of memory";
    return Status::create_failed;
  }
  Setup& s = *st;
  s.steps.step([&] { s.open(); })
      .step([&] { s.publish(); })           // round 1: DCT numbers, keys, areas
      .step([&] { s.address_partners(); })
      .step([&] { s.hear_partners(); });    // round 2: how it went
  EndpointPool::count_setup(counted.bytes(), counted.collectives());
  if (s.t) s.t->setup_bytes_ = counted.bytes();
  if (const SetupOutcome& o = s.steps.outcome(); !o.ok()) {
    if (!o.why.empty()) *why = o.why;
    return o.status;
  }
  *out = std::move(s.t);
  return Status::ok;
}

void DcLeaderTransport::Setup::open() {
  std::string why;
  EndpointPool* pool = EndpointPool::get(opt, &why);
  if (!pool) {
    steps.fail(Status::unavailable, why);
    return;
  }
  std::lock_guard<std::mutex> lock(pool->mutex());
  const std::shared_ptr<Device>& dev = pool->device();
  if (!dev->verbs().has_dc()) {
    steps.fail(Status::unavailable, "the verbs libraries lack DC (mlx5dv_create_qp, SRQ, AH)");
    return;
  }
  if (cards.size() > wire::kMaxMembers) {
    steps.fail(Status::unavailable, "more leaders than an immediate can name (65,536)");
    return;
  }
  t.reset(new DcLeaderTransport(pool, dev, areas, opt));
  t->first_rank_.assign(first_rank.begin(), first_rank.end());
  t->peers_.resize(cards.size());
  for (std::size_t p = 0; p < cards.size(); ++p) t->peers_[p].member = static_cast<std::uint32_t>(p);
  t->pending_.reserve(cards.size());
  for (CounterRow& v : t->slot_.from) v.reset(cards.size());
  t->slot_.sent_to.reset(cards.size());
  t->me_ = static_cast<std::uint32_t>(boot.rank());
  if (!make_queues(*t) || !register_areas(*t)) return;
  mine.ok = 1;
  mine.dctn = t->dct_->qp_num;
  mine.key = t->key_;
  std::memcpy(mine.gid, dev->address().gid, sizeof mine.gid);
  mine.lid = dev->address().lid;
  for (int p = 0; p < 2; ++p) {
    mine.out_addr[p] = reinterpret_cast<std::uintptr_t>(areas.out[p]);
    mine.rkey[p] = t->out_mr_[p]->rkey();
  }
  mine.out_bytes = areas.bytes;
}

// The CQ, SRQ (its receives posted), DCT and DCIs, in their working states.
bool DcLeaderTransport::Setup::make_queues(DcLeaderTransport& t) {
  const Device& dev = *t.dev_;
  const Verbs& v = dev.verbs();
  const std::size_t n_dci = std::min<std::size_t>(kMaxDcis, peers.empty() ? 1 : peers.size());
  // Two rounds in flight per partner (pipelined parities), with room.
  t.srq_depth_ = static_cast<std::uint32_t>(4 * cards.size() + 64);
  const int depth = static_cast<int>(t.srq_depth_ + n_dci * kDciDepth);
  t.cq_ = VerbsPtr<ibv_cq>(v.create_cq(dev.context(), depth, nullptr, nullptr, 0),
                           VerbsDeleter<ibv_cq>{v.destroy_cq, "ibv_destroy_cq(DC)"});
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = t.srq_depth_;
  sa.attr.max_sge = 1;
  if (t.cq_) {
    t.srq_ = VerbsPtr<ibv_srq>(v.create_srq(dev.pd(), &sa),
                               VerbsDeleter<ibv_srq>{v.destroy_srq, "ibv_destroy_srq"});
  }
  t.key_ = std::random_device{}() | std::uint64_t{std::random_device{}()} << 32;
  if (t.srq_) t.dct_ = make_dc_qp(dev, t.cq_.get(), t.srq_.get(), true, t.key_);
  bool ok = t.dct_ && bring_up(dev, t.dct_.get(), true, opt) &&
            t.post_receives(t.srq_depth_) == Status::ok;
  t.dcis_.resize(n_dci);
  for (Dci& d : t.dcis_) {
    if (!ok) break;
    d.qp = make_dc_qp(dev, t.cq_.get(), nullptr, false, 0);
    d.ex = d.qp ? v.qp_to_qp_ex(d.qp.get()) : nullptr;
    d.dv = d.ex ? v.dv_qp_ex(d.ex) : nullptr;
    d.groups.assign(kDciDepth, 0);
    ok = d.dv && bring_up(dev, d.qp.get(), false, opt);
  }
  if (!ok) steps.fail(Status::unavailable, "creating the DC queues failed (CQ, SRQ, DCT, DCIs)");
  return ok;
}

bool DcLeaderTransport::Setup::register_areas(DcLeaderTransport& t) {
  bool ok = areas.bytes > 0;
  for (int p = 0; p < 2 && ok; ++p) {
    ok = MemoryRegion::create(t.dev_, areas.in[p], areas.bytes, IBV_ACCESS_LOCAL_WRITE,
                              &t.in_mr_[p]) == Status::ok &&
         MemoryRegion::create(t.dev_, areas.out[p], areas.bytes,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                              &t.out_mr_[p]) == Status::ok;
  }
  if (!ok) steps.fail(Status::unavailable, "registering the staging areas failed");
  return ok;
}

void DcLeaderTransport::Setup::publish() {
  if (!boot.allgather(&mine, cards.data(), sizeof mine)) {
    steps.fail(Status::unavailable, "set-up allgather failed");
    mine.ok = 0;
  }
}

// An address handle per partner, each on a DCI (round robin).
void DcLeaderTransport::Setup::address_partners() {
  if (!mine.ok) return;
  const Verbs& v = t->dev_->verbs();
  std::size_t next = 0;
  for (int p : peers) {
    if (p < 0 || static_cast<std::size_t>(p) >= cards.size() || p == boot.rank() ||
        !cards[static_cast<std::size_t>(p)].ok) {
      steps.fail(Status::unavailable, "a partner leader has no DC");
      continue;
    }
    const DcCard& c = cards[static_cast<std::size_t>(p)];
    Peer& peer = t->peers_[static_cast<std::size_t>(p)];
    ibv_ah_attr a = av(*t->dev_, &c);
    peer.ah = VerbsPtr<ibv_ah>(v.create_ah(t->dev_->pd(), &a),
                               VerbsDeleter<ibv_ah>{v.destroy_ah, "ibv_destroy_ah"});
    if (!peer.ah) {
      steps.fail(Status::unavailable, "no address handle to a partner leader");
      continue;
    }
    peer.dctn = c.dctn;
    peer.key = c.key;
    for (int q = 0; q < 2; ++q) {
      peer.out_addr[q] = c.out_addr[q];
      peer.rkey[q] = c.rkey[q];
    }
    peer.out_bytes = c.out_bytes;
    peer.dci = next++ % t->dcis_.size();
    peer.active = true;
  }
}

void DcLeaderTransport::Setup::hear_partners() {
  const std::uint32_t ok_here = steps.failed_here() ? 0 : 1;
  std::vector<std::uint32_t> all(cards.size());
  if (!boot.allgather(&ok_here, all.data(), sizeof ok_here)) {
    steps.fail(Status::unavailable, "set-up allgather failed");
    return;
  }
  for (int p : peers) {
    if (p >= 0 && static_cast<std::size_t>(p) < all.size() && all[static_cast<std::size_t>(p)] == 0) {
      steps.fail(Status::unavailable, "a partner leader's DC set-up failed");
    }
  }
}

bool DcLeaderTransport::reset_dci(Dci& d) noexcept {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  if (dev_->verbs().modify_qp(d.qp.get(), &a, IBV_QP_STATE) != 0 ||
      !bring_up(*dev_, d.qp.get(), false, opt_)) {
    return false;
  }
  d.failed = false;
  d.free = kDciDepth;
  d.head = 0;
  d.count = 0;
  return true;
}

}  // namespace mlxa2a::mlx5
