// What the RDMA engine is told by its caller (core/mpi builds it from the
// MLXA2A_NET_* switches; tests fill it directly). MPI-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mlxa2a::mlx5 {

struct NetOptions {
  struct Port {
    std::string device;  // e.g. "mlx5_0"
    int port = 0;        // 0: the device's first ACTIVE port
  };
  std::string verbs_library = "libibverbs.so.1";  // MLXA2A_NET_VERBS_LIBRARY
  std::vector<Port> devices;  // MLXA2A_NET_DEVICES; empty: first ACTIVE port of any device
  int gid_index = -1;         // MLXA2A_NET_GID_INDEX; -1: matched by subnet (gid_choice.h)
  std::uint32_t timeout_ms = 120000;  // MLXA2A_NET_TIMEOUT: an arrival awaited longer fails
  std::uint8_t qp_timeout = 18;       // MLXA2A_NET_QP_TIMEOUT: 4.096 us * 2^n per retry
  std::uint8_t retry_count = 7;       // MLXA2A_NET_RETRY_COUNT
  // The fabric's QoS and partition (core/mlx5/qos.h), UCX's defaults:
  int traffic_class = -1;  // MLXA2A_NET_TRAFFIC_CLASS; -1: 106 on RoCE, 0 on InfiniBand
  int service_level = 0;   // MLXA2A_NET_SL
  int pkey = -1;           // MLXA2A_NET_PKEY; -1: the first full-member P_Key
  // This leader's index among its node's leaders: without MLXA2A_NET_DEVICES,
  // leaders sharing a NUMA node spread over its HCAs (core/mlx5/hca_choice.h).
  int leader_slot = 0;
  // Link layers a port may have (core/mlx5/link_layer.h: kLinkIb, kLinkEth):
  // set by the set-up to the one the team's leaders have in common.
  std::uint32_t link_layers = 3;
  bool link_matched = false;  // ports of another layer were skipped for it (the trace says so)
  bool oversubscribed = false;        // yield the core between polls at once
  // Called about once per millisecond while a wait yields (e.g. to drive MPI
  // progress for a peer, core/mpi/team.cc). May be empty.
  std::function<void()> idle;
};

}  // namespace mlxa2a::mlx5
