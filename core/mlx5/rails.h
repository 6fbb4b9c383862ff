// A node's rails (MLXA2A_LEADERS=rails; docs/hier-transports.md, "Every
// rail"): its ACTIVE, addressable ports of the preferred link layer
// (InfiniBand when the node has any, as the team's link-layer agreement
// prefers it), in device-list order - rail j is the j-th. On a homogeneous
// cluster the same index names the same rail on every node. InfiniBand
// ports on another subnet than the first are not rails: a process opens one
// port, and a sub-team whose nodes' ranks sit on different rails pairs
// across them, which separate subnets cannot carry (such nodes keep one
// leader on the team's common subnet, setup_card.h rail_subnet).
//
// Contract: set-up only (opens each device briefly); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/mlx5/options.h"
#include "core/mlx5/verbs.h"

namespace mlxa2a::mlx5 {

// One ACTIVE, addressable port (InfiniBand: LID set) of a listed device.
struct ActivePort {
  std::string device;
  int port = 1;
  bool roce = false;
  std::uint64_t ib_subnet = 0;  // InfiniBand: GID 0's subnet prefix (ib_subnet_of)
  int device_index = 0;         // into the device list
};

// Every device's ACTIVE, addressable ports, in list order.
std::vector<ActivePort> active_ports(const Verbs& v, ibv_device** list, int n);

// Of ports, the rails: those of the preferred link layer among `layers`
// (link_layer.h bits), InfiniBand first.
std::vector<ActivePort> rails_of(const std::vector<ActivePort>& ports, std::uint32_t layers);

struct RailsHere {
  int count = 0;  // the node's rails (0: none, or MLXA2A_NET_DEVICES names the port)
  int open = -1;  // the rail of this process's open port, -1 when none is open
};
// This process's view (the count is read once per process and kept).
RailsHere rails_here(const NetOptions& opt) noexcept;

}  // namespace mlxa2a::mlx5
