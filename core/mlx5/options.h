// What the RDMA engine is told by its caller: the MLXA2A_NET_* switches as the
// switch table filled them (core/config/net.h; tests fill them directly), and
// what this leader's team adds. MPI-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/net.h"

namespace mlxa2a::mlx5 {

struct NetOptions : core::config::NetSwitches {
  using Port = core::config::NetPort;  // port 0: the device's first ACTIVE port
  NetOptions() = default;
  explicit NetOptions(const core::config::NetSwitches& s) : NetSwitches(s) {}
  // This leader's index among its node's leaders: without MLXA2A_NET_DEVICES,
  // leaders sharing a NUMA node spread over its HCAs (core/mlx5/hca_choice.h).
  int leader_slot = 0;
  // MLXA2A_LEADERS=rails: the rail this leader serves (core/mlx5/rails.h);
  // its port is opened whatever the locality or the team's subnet. -1: none.
  int rail = -1;
  // Link layers a port may have (core/mlx5/link_layer.h: kLinkIb, kLinkEth):
  // set by the set-up to the one the team's leaders have in common.
  std::uint32_t link_layers = 3;
  bool link_matched = false;  // ports of another layer were skipped for it (the trace says so)
  // InfiniBand rails on separate subnets: the subnet prefix (ib_subnet_of)
  // every leader of the team prefers, so that all meet on one
  // (core/mlx5/setup_card.h rail_subnet); 0: no preference.
  std::uint64_t ib_subnet = 0;
  bool oversubscribed = false;        // yield the core between polls at once
  // Called about once per millisecond while a wait yields (e.g. to drive MPI
  // progress for a peer, core/mpi/team.cc). May be empty.
  std::function<void()> idle;
};

}  // namespace mlxa2a::mlx5
