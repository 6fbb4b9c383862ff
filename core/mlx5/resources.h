// RAII owners of verbs objects, and the opened device (context, protection
// domain, completion queue) with its port's address.
//
// Contract
// * One owner per verbs object; none is copyable. A MemoryRegion or QueuePair
//   holds a shared_ptr to its Device, so children always die before the PD,
//   CQ and context they were made from, whatever order their owners go in:
//   destruction is QP -> (CQ) -> MR -> PD -> context by construction (the
//   Device's own members are declared context, PD, CQ and die in reverse).
// * Destructors never throw; a failing destroy verb is logged and ignored.
// * Not thread-safe: the endpoint pool serialises its users.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mlx5/gid_choice.h"
#include "core/mlx5/options.h"
#include "core/mlx5/qos.h"
#include "core/mlx5/verbs.h"
#include "core/status.h"

namespace mlxa2a::mlx5 {

template <class T>
struct VerbsDeleter {
  int (*destroy)(T*) = nullptr;
  const char* what = "";
  void operator()(T* p) const noexcept;
};
template <class T>
using VerbsPtr = std::unique_ptr<T, VerbsDeleter<T>>;

// How a peer reaches this port: LID on InfiniBand, GID on RoCE.
struct PortAddress {
  std::uint16_t lid = 0;
  // RoCE: the GID in use; InfiniBand: GID 0, whose upper 64 bits are the
  // port's subnet prefix (set-up cards match them, setup_card.h).
  std::uint8_t gid[16] = {};
  std::int32_t gid_index = 0;  // local index used as sgid_index
  std::uint8_t roce = 0;       // link layer Ethernet
  std::uint8_t mtu = 0;        // enum ibv_mtu, the port's active MTU
};

// What the ACTIVE, addressable ports this process may use (MLXA2A_NET_DEVICES,
// else all) offer a team: their link layers (link_layer.h bits; 0 when there
// is none) and the distinct subnet prefixes of the InfiniBand ones (the upper
// 64 bits of GID 0, big-endian bytes as a number), at most kMaxOffered.
struct PortOffer {
  static constexpr int kMaxOffered = 4;
  std::uint32_t links = 0;
  std::uint32_t n_subnets = 0;
  std::uint64_t subnets[kMaxOffered] = {};
  void add_subnet(std::uint64_t s) noexcept;
};
// Opens each device briefly: set-up only.
PortOffer available_ports(const Verbs& v, const NetOptions& opt) noexcept;
// GID 0's subnet prefix as PortOffer numbers it.
std::uint64_t ib_subnet_of(const std::uint8_t gid[16]) noexcept;

class Device {
 public:
  // Opens the first usable port in opt.devices (or the first ACTIVE port of
  // any device), allocates the PD and one CQ of cq_depth entries (checked
  // against max_cqe). Status::unavailable with *why set when there is none.
  static Status open(const Verbs& v, const NetOptions& opt, int cq_depth,
                     std::shared_ptr<Device>* out, std::string* why) noexcept;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Verbs& verbs() const { return v_; }
  ibv_context* context() const { return ctx_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  ibv_cq* cq() const { return cq_.get(); }
  int cq_depth() const { return cq_depth_; }
  // Grows the CQ to at least `depth` entries (ibv_resize_cq, which keeps its
  // completions): to twice its depth when that is more, never past max_cqe.
  // Nobody may poll it meanwhile (the pool's mutex). false: it stays as it was.
  bool grow_cq(int depth) noexcept;
  std::uint8_t port() const { return port_; }
  const PortAddress& address() const { return addr_; }
  // RoCE: the GIDs this port may use (table order; only the forced one with
  // MLXA2A_NET_GID_INDEX). Empty on InfiniBand.
  const std::vector<GidCandidate>& gids() const { return gids_; }
  // Addresses the port by candidate `i` of gids() from now on (before any QP
  // connects: the pool's job).
  void use_gid(std::size_t i) noexcept {
    addr_.gid_index = gids_[i].index;
    for (int b = 0; b < 16; ++b) addr_.gid[b] = gids_[i].raw[b];
  }
  // Reads the port's address again (after IBV_EVENT_PORT_ACTIVE, _LID_CHANGE,
  // _GID_CHANGE, ...): LID, GIDs (the one in use kept by index when it is
  // still a candidate), active MTU, P_Key index. Only what new connections
  // use changes; connected QPs keep theirs. false with *why when the port
  // is not ACTIVE or has no usable address now.
  bool refresh(const NetOptions& opt, std::string* why) noexcept;
  const ibv_device_attr& attr() const { return attr_; }
  const std::string& name() const { return name_; }
  // Traffic class, SL and P_Key every QP on this port uses (core/mlx5/qos.h).
  const Qos& qos() const { return qos_; }
  // Why this port: "MLXA2A_NET_DEVICES", a locality token such as
  // "numa1-near,rail2/2" (core/mlx5/hca_choice.h), or "fallback".
  const std::string& choice() const { return choice_; }

 private:
  explicit Device(const Verbs& v) : v_(v) {}
  // The first ACTIVE, addressable port in [first, last] whose QoS resolves:
  // fills port_, addr_, qos_. false with *why otherwise.
  bool take_port(int first, int last, const NetOptions& opt, std::string* why);
  bool read_address(const ibv_port_attr& pa, const NetOptions& opt, int keep_index,
                    std::string* why);
  const Verbs& v_;
  VerbsPtr<ibv_context> ctx_;  // declared first: destroyed last
  VerbsPtr<ibv_pd> pd_;
  VerbsPtr<ibv_cq> cq_;
  int cq_depth_ = 0;
  std::uint8_t port_ = 1;
  PortAddress addr_;
  std::vector<GidCandidate> gids_;
  ibv_device_attr attr_{};
  std::string name_;
  Qos qos_;
  std::string choice_;
};

// Warnings for MLXA2A_NET_VERBS_LIBRARY / MLXA2A_NET_DEVICES values that name
// nothing here: a library that does not load (when `library_set`: the
// default's absence just means a host without RDMA), devices missing from the
// verbs device list. Each names the variable, the value and what exists; the
// inter-node engine then falls back (PMPI leaders) as before. Loads the verbs
// library (load_verbs) when devices are given or the library was set.
std::vector<std::string> unmatched_net_switches(const NetOptions& opt, bool library_set) noexcept;

// A registered range. Counts itself in live_count() (MLXA2A_COLL_STATS).
class MemoryRegion {
 public:
  static Status create(std::shared_ptr<Device> dev, void* addr, std::size_t len, int access,
                       std::unique_ptr<MemoryRegion>* out) noexcept;
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  std::uint32_t lkey() const { return mr_->lkey; }
  std::uint32_t rkey() const { return mr_->rkey; }
  static long live_count() noexcept;

 private:
  MemoryRegion() = default;
  std::shared_ptr<Device> dev_;  // declared first: outlives mr_
  VerbsPtr<ibv_mr> mr_;
};

// An RC queue pair on the device's PD and CQ, moved to INIT at creation.
class QueuePair {
 public:
  struct Caps {
    std::uint32_t send_depth;
    std::uint32_t recv_depth;
    std::uint32_t inline_bytes;  // asked for; the granted value is in inline_bytes()
    // SGEs per send WR (gathers, core/mlx5/gather.h); capped at the device's max_sge.
    std::uint32_t send_sge = 1;
  };
  static Status create(std::shared_ptr<Device> dev, const Caps& caps,
                       std::unique_ptr<QueuePair>* out) noexcept;
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;
  // INIT -> RTR -> RTS towards the remote QP (IB spec 11.2.5, man ibv_modify_qp).
  // stripe: which of its pair's QPs it is (RoCE: mixed into its flow label).
  Status connect(const PortAddress& remote, std::uint32_t remote_qpn, std::uint32_t remote_psn,
                 std::uint32_t my_psn, const NetOptions& opt, std::uint32_t stripe = 0) noexcept;
  ibv_qp* get() const { return qp_.get(); }
  std::uint32_t qpn() const { return qp_->qp_num; }
  std::uint32_t inline_bytes() const { return inline_; }
  std::uint32_t send_sge() const { return send_sge_; }  // granted
  std::uint32_t send_depth() const { return send_depth_; }
  std::uint32_t recv_depth() const { return recv_depth_; }
  static long live_count() noexcept;

 private:
  QueuePair() = default;
  std::shared_ptr<Device> dev_;  // declared first: outlives qp_
  VerbsPtr<ibv_qp> qp_;
  std::uint32_t inline_ = 0;
  std::uint32_t send_sge_ = 1;
  std::uint32_t send_depth_ = 0;
  std::uint32_t recv_depth_ = 0;
};

}  // namespace mlxa2a::mlx5
