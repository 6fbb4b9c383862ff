// Which HCA port a leader process takes when MLXA2A_NET_DEVICES does not say:
// the ACTIVE port nearest the process's cores, several leaders of a node
// spread over equally near ports (multi-rail).
//
// Why: on nodes with several HCAs the first device in list order (what the
// engine took before) is the same for every leader and may sit on the other
// socket, or be a storage / Ethernet-only port. NCCL and UCX pick by PCIe /
// NUMA distance; so do we, at the granularity hwloc gives reliably: the NUMA
// node of the device's PCIe attachment against the NUMA nodes of the
// process's CPU binding.
//
// Contract
// * choose_hca() is a pure function (tests give it any machine).
// * Locality is the seam to the machine: HwlocLocality in production (hwloc's
//   I/O tree; devices hwloc does not know, such as fakeverbs', fall back to
//   the verbs library's ibv_read_sysfs_file "device/numa_node", which
//   fakeverbs answers from FAKEVERBS_NUMA). Blocking, set-up only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/mlx5/verbs.h"

namespace mlxa2a::mlx5 {

struct PortCandidate {
  std::string device;  // "mlx5_0"
  int port = 1;
  bool roce = false;
  int numa = -1;  // NUMA node of the device, -1 unknown
  // On the subnet the team's leaders all prefer (rails on separate subnets,
  // setup_card.h): when some candidate is, only those are chosen from.
  bool on_subnet = false;
};

struct HcaChoice {
  int index = -1;      // into the candidates; -1: none
  std::string reason;  // one token for the trace, e.g. "numa0-near,rail1/2"
};

// Ports on the assigned subnet only, when some are and some are not (reason
// ",subnet").
// Then nearest first: a device on one of `my_numa` (distance 0), of unknown
// locality or when the process's own is unknown (1), on another NUMA node
// (2). Among the nearest, leader `leader_slot` of its node takes the
// (leader_slot mod count)-th in list order, so leaders that share a NUMA
// node spread over its HCAs and one leader per NUMA node takes its own.
HcaChoice choose_hca(const std::vector<PortCandidate>& candidates, const std::vector<int>& my_numa,
                     int leader_slot);

class Locality {
 public:
  virtual ~Locality() = default;
  // NUMA node of the device (-1 unknown).
  virtual int numa_of(const Verbs& v, ibv_device* dev) = 0;
  // NUMA nodes this process's CPU binding covers (empty: unknown).
  virtual std::vector<int> my_numa() = 0;
};

// hwloc, then verbs' sysfs reader. nullptr if hwloc cannot load a topology.
// Thread-safe; the topology is loaded once per process and kept.
std::unique_ptr<Locality> hwloc_locality();

}  // namespace mlxa2a::mlx5
