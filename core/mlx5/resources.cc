#include "core/mlx5/resources.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "core/mlx5/hca_choice.h"
#include "core/mlx5/link_layer.h"
#include "core/mlx5/rails.h"

namespace mlxa2a::mlx5 {

namespace {

std::atomic<long> g_mrs_live{0};
std::atomic<long> g_qps_live{0};

bool ipv4_mapped(const ibv_gid& g) {
  static constexpr std::uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, sizeof kPrefix) == 0;
}

bool zero_gid(const ibv_gid& g) {
  for (std::uint8_t b : g.raw) {
    if (b != 0) return false;
  }
  return true;
}

// The length of the subnet prefix of a GID's IP address, in GID bits (an IPv4
// /24 is 96 + 24), from the netmask of the local interface that holds the
// address (getifaddrs), else `assumed`: a RoCE GID is made from an address
// of the port's netdev, so normally it is there (a process in another
// network namespace, or fakeverbs, sees none).
// The address bytes of an AF_INET / AF_INET6 socket address (a netmask's
// family field is not relied on).
const std::uint8_t* ip_bytes(const sockaddr* a, int family) {
  if (family == AF_INET) {
    return reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr);
  }
  return reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr.s6_addr;
}

int gid_prefix(const ibv_gid& g, bool v4, int assumed) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return assumed;
  const int family = v4 ? AF_INET : AF_INET6;
  const std::size_t len = v4 ? 4 : 16;  // the address: a GID's last 4 bytes, or all 16
  int bits = -1;
  for (const ifaddrs* i = all; i && bits < 0; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != family ||
        std::memcmp(ip_bytes(i->ifa_addr, family), g.raw + 16 - len, len) != 0) {
      continue;
    }
    const std::uint8_t* mask = ip_bytes(i->ifa_netmask, family);
    bits = v4 ? 96 : 0;
    for (std::size_t b = 0; b < len; ++b) bits += __builtin_popcount(mask[b]);
  }
  freeifaddrs(all);
  return bits < 0 ? assumed : bits;
}

// The RoCE GIDs a port may use: the forced index, else every RoCE v2 entry
// that is IPv4-mapped or a global IPv6 address (routable over L3, what RoCE
// fabrics are configured for), IPv4 first, table order, each with its subnet
// (gid_prefix). The set-up picks one whose subnet the other nodes share, and
// refuses RDMA when there is none (gid_choice.h, setup_card.h). Without
// _ibv_query_gid_ex (old rdma-core) the type is unknown; mlx5 lists each
// address as v1 then v2, so the last IPv4-mapped entry is the one.
std::vector<GidCandidate> gid_candidates(const Verbs& v, ibv_context* ctx, std::uint8_t port,
                                         int table_len, int forced, std::string* why) {
  std::vector<GidCandidate> ipv4, ipv6;
  auto add = [](std::vector<GidCandidate>* to, const ibv_gid& g, int i, int prefix) {
    GidCandidate c;
    std::memcpy(c.raw, g.raw, sizeof c.raw);
    c.index = i;
    c.prefix = prefix;
    to->push_back(c);
  };
  if (forced >= 0) {
    ibv_gid g{};
    if (forced >= table_len || v.query_gid(ctx, port, forced, &g) != 0 || zero_gid(g)) {
      *why = "MLXA2A_NET_GID_INDEX=" + std::to_string(forced) + " is not a valid GID";
      return {};
    }
    add(&ipv4, g, forced, 0);  // forced: no subnet to match
    return ipv4;
  }
  for (int i = 0; i < table_len; ++i) {
    ibv_gid g{};
    if (v.query_gid(ctx, port, i, &g) != 0 || zero_gid(g)) continue;
    const bool v4 = ipv4_mapped(g);
    if (!v4 && g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80) continue;  // link-local
    if (v.query_gid_ex) {
      ibv_gid_entry e{};
      if (v.query_gid_ex(ctx, port, static_cast<std::uint32_t>(i), &e, 0, sizeof e) != 0 ||
          e.gid_type != IBV_GID_TYPE_ROCE_V2) {
        continue;
      }
    } else if (!v4) {
      continue;
    } else if (!ipv4.empty()) {
      ipv4.pop_back();  // v1 then v2: keep the later
    }
    add(v4 ? &ipv4 : &ipv6, g, i, gid_prefix(g, v4, v4 ? 96 + 24 : 64));
  }
  ipv4.insert(ipv4.end(), ipv6.begin(), ipv6.end());
  if (ipv4.size() > static_cast<std::size_t>(kMaxGidCandidates)) ipv4.resize(kMaxGidCandidates);
  if (ipv4.empty()) *why = "no routable RoCE v2 GID (set MLXA2A_NET_GID_INDEX)";
  return ipv4;
}

std::uint32_t layer_of(const ibv_port_attr& pa) {
  return pa.link_layer == IBV_LINK_LAYER_ETHERNET ? kLinkEth : kLinkIb;
}

// Without MLXA2A_NET_DEVICES: every ACTIVE port of every device, the one
// choose_hca() takes first (then the others in list order, should it fail to
// open); with a rail (MLXA2A_LEADERS=rails, NetOptions::rail) that rail's
// port first, whatever its locality or subnet: its partners are on the same
// rail (rails.h). *reason: the choice's trace token. Opens each device briefly.
// Locality (hwloc's topology with its PCI scan, tens of milliseconds) is read
// only when there is a choice to make: with one ACTIVE port it would only
// lengthen the first set-up, and with it the window in which teams set up
// concurrently in other threads find a pair pending and fall back.
std::vector<NetOptions::Port> ports_by_locality(const Verbs& v, ibv_device** list, int n,
                                                const NetOptions& opt, std::string* reason) {
  std::vector<PortCandidate> cands;
  std::vector<int> device_of;  // cands[i] is a port of list[device_of[i]]
  const std::vector<ActivePort> ports = active_ports(v, list, n);
  const std::vector<ActivePort> rails = rails_of(ports, opt.link_layers);
  for (const ActivePort& a : ports) {
    if (!(opt.link_layers & (a.roce ? kLinkEth : kLinkIb))) continue;  // the others cannot reach it
    const bool on_subnet = !a.roce && opt.ib_subnet != 0 && a.ib_subnet == opt.ib_subnet;
    cands.push_back({a.device, a.port, a.roce, -1, on_subnet});
    device_of.push_back(a.device_index);
  }
  HcaChoice c;
  if (opt.rail >= 0 && static_cast<std::size_t>(opt.rail) < rails.size()) {
    const ActivePort& r = rails[static_cast<std::size_t>(opt.rail)];
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (cands[i].device == r.device && cands[i].port == r.port) c.index = static_cast<int>(i);
    }
    c.reason = "rail" + std::to_string(opt.rail + 1) + "/" + std::to_string(rails.size());
  } else {
    const std::unique_ptr<Locality> where = cands.size() > 1 ? hwloc_locality() : nullptr;
    if (where) {
      for (std::size_t i = 0; i < cands.size(); ++i) {
        cands[i].numa = where->numa_of(v, list[device_of[i]]);
      }
    }
    c = choose_hca(cands, where ? where->my_numa() : std::vector<int>{}, opt.leader_slot);
  }
  std::vector<NetOptions::Port> out;
  if (c.index < 0) return out;
  *reason = c.reason;
  out.push_back({cands[static_cast<std::size_t>(c.index)].device,
                 cands[static_cast<std::size_t>(c.index)].port});
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (static_cast<int>(i) != c.index) out.push_back({cands[i].device, cands[i].port});
  }
  return out;
}

}  // namespace

std::vector<std::string> unmatched_net_switches(const NetOptions& opt,
                                                bool library_set) noexcept try {
  std::vector<std::string> out;
  if (!library_set && opt.devices.empty()) return out;
  const Verbs* v = load_verbs(opt.verbs_library.c_str());
  if (!v) {
    if (library_set) {
      out.push_back("MLXA2A_NET_VERBS_LIBRARY=" + opt.verbs_library + " names no usable verbs " +
                    "library (" + verbs_unavailable_reason() + "; the default is " +
                    NetOptions{}.verbs_library + "); no RDMA: multi-node leaders use PMPI");
    }
    return out;
  }
  int n = 0;
  std::unique_ptr<ibv_device*, decltype(v->free_device_list)> list(v->get_device_list(&n),
                                                                    v->free_device_list);
  std::vector<std::string> found;
  for (int i = 0; list && i < n; ++i) found.emplace_back(v->get_device_name(list.get()[i]));
  std::string value, missing, have;
  bool any_found = false;
  for (const NetOptions::Port& p : opt.devices) {
    const std::string name = p.port > 0 ? p.device + ":" + std::to_string(p.port) : p.device;
    value += (value.empty() ? "" : ",") + name;
    if (std::find(found.begin(), found.end(), p.device) != found.end()) {
      any_found = true;
    } else {
      missing += (missing.empty() ? "" : ", ") + p.device;
    }
  }
  for (const std::string& f : found) have += (have.empty() ? "" : ", ") + f;
  if (!missing.empty()) {
    out.push_back("MLXA2A_NET_DEVICES=" + value + ": no RDMA device " + missing + " (found: " +
                  (have.empty() ? "none" : have) + "); " +
                  (any_found ? "only the others are tried"
                             : "no RDMA: multi-node leaders use PMPI"));
  }
  return out;
} catch (...) {  // allocation only: the check is advice, the run goes on without it
  return {};
}

template <class T>
void VerbsDeleter<T>::operator()(T* p) const noexcept {
  if (p && destroy) {
    if (const int rc = destroy(p); rc != 0) {
      MLXA2A_LOG(Warn, "%s failed (%s); the object is leaked", what, std::strerror(rc > 0 ? rc : errno));
    }
  }
}
template struct VerbsDeleter<ibv_context>;
template struct VerbsDeleter<ibv_pd>;
template struct VerbsDeleter<ibv_cq>;
template struct VerbsDeleter<ibv_mr>;
template struct VerbsDeleter<ibv_qp>;
template struct VerbsDeleter<ibv_srq>;
template struct VerbsDeleter<ibv_ah>;

std::uint64_t ib_subnet_of(const std::uint8_t gid[16]) noexcept {
  std::uint64_t s = 0;
  for (int b = 0; b < 8; ++b) s = s << 8 | gid[b];
  return s;
}

void PortOffer::add_subnet(std::uint64_t s) noexcept {
  for (std::uint32_t i = 0; i < n_subnets; ++i) {
    if (subnets[i] == s) return;
  }
  if (n_subnets < kMaxOffered) subnets[n_subnets++] = s;
}

PortOffer available_ports(const Verbs& v, const NetOptions& opt) noexcept try {
  int n = 0;
  std::unique_ptr<ibv_device*, decltype(v.free_device_list)> list(v.get_device_list(&n),
                                                                   v.free_device_list);
  PortOffer offer;
  for (int i = 0; list && i < n; ++i) {
    const std::string name = v.get_device_name(list.get()[i]);
    auto allowed = [&](int port) {
      if (opt.devices.empty()) return true;
      for (const NetOptions::Port& w : opt.devices) {
        if (w.device == name && (w.port == 0 || w.port == port)) return true;
      }
      return false;
    };
    VerbsPtr<ibv_context> ctx(v.open_device(list.get()[i]), {v.close_device, "ibv_close_device"});
    ibv_device_attr attr{};
    if (!ctx || v.query_device(ctx.get(), &attr) != 0) continue;
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (!allowed(p) || v.query_port(ctx.get(), static_cast<std::uint8_t>(p), &pa) != 0 ||
          pa.state != IBV_PORT_ACTIVE ||
          (pa.link_layer != IBV_LINK_LAYER_ETHERNET && pa.lid == 0)) {
        continue;
      }
      offer.links |= layer_of(pa);
      ibv_gid g{};
      if (pa.link_layer != IBV_LINK_LAYER_ETHERNET &&
          v.query_gid(ctx.get(), static_cast<std::uint8_t>(p), 0, &g) == 0) {
        offer.add_subnet(ib_subnet_of(g.raw));
      }
    }
  }
  return offer;
} catch (...) {  // allocation only
  return {};
}

bool Device::grow_cq(int depth) noexcept {
  if (depth <= cq_depth_) return true;
  if (depth > attr_.max_cqe || !v_.resize_cq) return false;
  const int want = cq_depth_ <= attr_.max_cqe / 2 && 2 * cq_depth_ > depth ? 2 * cq_depth_ : depth;
  if (const int rc = v_.resize_cq(cq_.get(), want); rc != 0) {
    MLXA2A_LOG(Warn, "RDMA: ibv_resize_cq to %d entries failed (%s)", want, std::strerror(rc));
    return false;
  }
  MLXA2A_LOG(Debug, "RDMA: completion queue grown from %d to %d entries", cq_depth_, cq_->cqe);
  cq_depth_ = cq_->cqe;
  return cq_depth_ >= depth;
}

Status Device::open(const Verbs& v, const NetOptions& opt, int cq_depth,
                    std::shared_ptr<Device>* out, std::string* why) noexcept {
  try {
    int n = 0;
    std::unique_ptr<ibv_device*, decltype(v.free_device_list)> list(v.get_device_list(&n),
                                                                     v.free_device_list);
    if (!list || n <= 0) {
      *why = "no RDMA device";
      return Status::unavailable;
    }
    std::vector<NetOptions::Port> wanted = opt.devices;
    std::string reason = "MLXA2A_NET_DEVICES";
    if (wanted.empty()) wanted = ports_by_locality(v, list.get(), n, opt, &reason);
    *why = "no ACTIVE port on the devices allowed (MLXA2A_NET_DEVICES)";
    for (const NetOptions::Port& w : wanted) {
      ibv_device* dev = nullptr;
      for (int i = 0; i < n && !dev; ++i) {
        if (w.device == v.get_device_name(list.get()[i])) dev = list.get()[i];
      }
      if (!dev) continue;
      std::shared_ptr<Device> d(new Device(v));
      d->ctx_ = VerbsPtr<ibv_context>(v.open_device(dev), {v.close_device, "ibv_close_device"});
      if (!d->ctx_ || v.query_device(d->context(), &d->attr_) != 0) continue;
      const int first = w.port > 0 ? w.port : 1;
      const int last = w.port > 0 ? w.port : d->attr_.phys_port_cnt;
      if (!d->take_port(first, last, opt, why)) continue;
      if (cq_depth > d->attr_.max_cqe) cq_depth = d->attr_.max_cqe;
      d->pd_ = VerbsPtr<ibv_pd>(v.alloc_pd(d->context()), {v.dealloc_pd, "ibv_dealloc_pd"});
      if (!d->pd_) {
        *why = "ibv_alloc_pd failed";
        continue;
      }
      d->cq_ = VerbsPtr<ibv_cq>(v.create_cq(d->context(), cq_depth, nullptr, nullptr, 0),
                                {v.destroy_cq, "ibv_destroy_cq"});
      if (!d->cq_) {
        *why = "ibv_create_cq failed";
        continue;
      }
      d->cq_depth_ = d->cq_->cqe;
      d->name_ = w.device;
      // The first port tried is the one chosen; a later one is a fallback.
      d->choice_ = &w == &wanted.front() ? reason : "fallback";
      *out = std::move(d);
      why->clear();
      return Status::ok;
    }
    return Status::unavailable;
  } catch (...) {  // allocation only
    *why = "out of memory";
    return Status::unavailable;
  }
}

bool Device::take_port(int first, int last, const NetOptions& opt, std::string* why) {
  for (int p = first; p <= last; ++p) {
    ibv_port_attr pa{};
    if (v_.query_port(context(), static_cast<std::uint8_t>(p), &pa) != 0 ||
        pa.state != IBV_PORT_ACTIVE) {
      continue;
    }
    if (!(opt.link_layers & layer_of(pa))) {
      *why = std::string("no ACTIVE ") + link_layer_name(opt.link_layers) +
             " port (the other nodes' leaders have no other link layer)";
      continue;
    }
    port_ = static_cast<std::uint8_t>(p);
    addr_ = PortAddress{};
    gids_.clear();
    if (read_address(pa, opt, -1, why)) return true;
  }
  return false;
}

// The port's address as the port says now: active MTU, LID and GID 0 (its
// subnet prefix, set-up cards) on InfiniBand, the RoCE GID candidates and
// the one at `keep_index` (else the first), and the QoS (its P_Key index).
bool Device::read_address(const ibv_port_attr& pa, const NetOptions& opt, int keep_index,
                          std::string* why) {
  addr_.mtu = static_cast<std::uint8_t>(pa.active_mtu);
  addr_.roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (addr_.roce) {
    gids_ = gid_candidates(v_, context(), port_, pa.gid_tbl_len, opt.gid_index, why);
    if (gids_.empty()) return false;
    std::size_t k = 0;  // until a set-up matches the other nodes' subnets
    for (std::size_t i = 0; i < gids_.size(); ++i) {
      if (gids_[i].index == keep_index) k = i;
    }
    use_gid(k);
  } else {
    if (pa.lid == 0) {  // no subnet manager has configured the port yet
      *why = "the port has no LID (no subnet manager)";
      return false;
    }
    addr_.lid = pa.lid;
    ibv_gid g{};
    if (v_.query_gid(context(), port_, 0, &g) == 0) std::memcpy(addr_.gid, g.raw, sizeof addr_.gid);
  }
  return resolve_qos(v_, context(), port_, pa, opt, &qos_, why);
}

bool Device::refresh(const NetOptions& opt, std::string* why) noexcept try {
  ibv_port_attr pa{};
  if (v_.query_port(context(), port_, &pa) != 0) {
    *why = "ibv_query_port failed";
    return false;
  }
  if (pa.state != IBV_PORT_ACTIVE) {
    *why = "the port is not ACTIVE";
    return false;
  }
  return read_address(pa, opt, addr_.gid_index, why);
} catch (...) {  // allocation only (the GID list)
  *why = "out of memory";
  return false;
}

Status MemoryRegion::create(std::shared_ptr<Device> dev, void* addr, std::size_t len, int access,
                            std::unique_ptr<MemoryRegion>* out) noexcept {
  std::unique_ptr<MemoryRegion> m(new (std::nothrow) MemoryRegion);
  if (!m) return Status::net_failed;
  const Verbs& v = dev->verbs();
  m->mr_ = VerbsPtr<ibv_mr>(v.reg_mr(dev->pd(), addr, len, access), {v.dereg_mr, "ibv_dereg_mr"});
  if (!m->mr_) return Status::net_failed;
  m->dev_ = std::move(dev);
  g_mrs_live.fetch_add(1, std::memory_order_relaxed);
  *out = std::move(m);
  return Status::ok;
}

MemoryRegion::~MemoryRegion() {
  if (mr_) g_mrs_live.fetch_sub(1, std::memory_order_relaxed);
}

long MemoryRegion::live_count() noexcept { return g_mrs_live.load(std::memory_order_relaxed); }

Status QueuePair::create(std::shared_ptr<Device> dev, const Caps& caps,
                         std::unique_ptr<QueuePair>* out) noexcept {
  std::unique_ptr<QueuePair> q(new (std::nothrow) QueuePair);
  if (!q) return Status::net_failed;
  const Verbs& v = dev->verbs();
  const std::uint32_t max_wr = static_cast<std::uint32_t>(dev->attr().max_qp_wr);
  ibv_qp_init_attr init{};
  init.send_cq = dev->cq();
  init.recv_cq = dev->cq();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = caps.send_depth < max_wr ? caps.send_depth : max_wr;
  init.cap.max_recv_wr = caps.recv_depth < max_wr ? caps.recv_depth : max_wr;
  const auto max_sge = static_cast<std::uint32_t>(dev->attr().max_sge);
  init.cap.max_send_sge = caps.send_sge < 1 ? 1 : caps.send_sge < max_sge ? caps.send_sge : max_sge;
  init.cap.max_recv_sge = 1;
  // An adapter refuses an inline size above its own limit (which verbs does
  // not report): ask for half as much until it accepts; inline is an
  // optimisation. What it grants (often more: mlx5 rounds up to its WQE
  // size) is written back into init.cap (man ibv_create_qp).
  for (std::uint32_t ask = caps.inline_bytes;; ask /= 2) {
    const ibv_qp_cap asked = init.cap;
    init.cap.max_inline_data = ask;
    q->qp_ = VerbsPtr<ibv_qp>(v.create_qp(dev->pd(), &init), {v.destroy_qp, "ibv_destroy_qp"});
    if (q->qp_ || ask == 0) break;
    init.cap = asked;
  }
  if (!q->qp_) return Status::net_failed;
  g_qps_live.fetch_add(1, std::memory_order_relaxed);
  // ibv_create_qp writes back the granted capabilities (man ibv_create_qp).
  q->inline_ = init.cap.max_inline_data;
  q->send_sge_ = init.cap.max_send_sge;
  q->send_depth_ = init.cap.max_send_wr;
  q->recv_depth_ = init.cap.max_recv_wr;
  q->dev_ = std::move(dev);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = q->dev_->qos().pkey_index;
  a.port_num = q->dev_->port();
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (v.modify_qp(q->get(), &a,
                  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    return Status::net_failed;
  }
  *out = std::move(q);
  return Status::ok;
}

QueuePair::~QueuePair() {
  if (qp_) g_qps_live.fetch_sub(1, std::memory_order_relaxed);
}

long QueuePair::live_count() noexcept { return g_qps_live.load(std::memory_order_relaxed); }

Status QueuePair::connect(const PortAddress& remote, std::uint32_t remote_qpn,
                          std::uint32_t remote_psn, std::uint32_t my_psn,
                          const NetOptions& opt, std::uint32_t stripe) noexcept {
  const Verbs& v = dev_->verbs();
  const PortAddress& me = dev_->address();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  // Both ends must agree on the path MTU: the smaller active MTU.
  a.path_mtu = static_cast<ibv_mtu>(me.mtu < remote.mtu ? me.mtu : remote.mtu);
  a.dest_qp_num = remote_qpn;
  a.rq_psn = remote_psn & 0xffffff;
  a.max_dest_rd_atomic = 0;  // writes only: no RDMA READ/atomic is ever targeted at us
  // RNR (no receive posted here): receives are re-posted as arrivals are
  // polled (endpoint_pool.cc), so a requester meets one only when this end
  // is slow to poll. Each RNR NAK makes it wait at least this long before
  // it retries: 0.64 ms (IB spec table 45, value 12), as NCCL and UCX use.
  // 31 (491.52 ms, what we had) stalled the writer half a second on any RNR
  // however soon the receive was back. Budget: x (rnr_retry 6 + 1) = 4.5 ms.
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = dev_->port();
  a.ah_attr.sl = dev_->qos().service_level;
  if (me.roce) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(me.gid_index);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = dev_->qos().traffic_class;
    a.ah_attr.grh.flow_label = pair_flow_label(qpn(), remote_qpn, stripe);
  } else {
    a.ah_attr.dlid = remote.lid;
  }
  if (v.modify_qp(get(), &a,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    return Status::net_failed;
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.sq_psn = my_psn & 0xffffff;
  r.timeout = opt.qp_timeout;
  r.retry_cnt = opt.retry_count;
  // Finite (7 would retry forever): a stalled peer ends in
  // IBV_WC_RNR_RETRY_EXC_ERR after 3.4 s, before any MLXA2A_NET_TIMEOUT
  // worth having, instead of the HCA waiting for it forever.
  r.rnr_retry = 6;
  r.max_rd_atomic = 0;
  if (v.modify_qp(get(), &r,
                  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    return Status::net_failed;
  }
  return Status::ok;
}

}  // namespace mlxa2a::mlx5
