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
  int gid_index = -1;         // MLXA2A_NET_GID_INDEX; -1: RoCE v2 IPv4-mapped, found
  std::uint32_t timeout_ms = 120000;  // MLXA2A_NET_TIMEOUT: an arrival awaited longer fails
  std::uint8_t qp_timeout = 18;       // MLXA2A_NET_QP_TIMEOUT: 4.096 us * 2^n per retry
  std::uint8_t retry_count = 7;       // MLXA2A_NET_RETRY_COUNT
  bool oversubscribed = false;        // yield the core between polls at once
  // Called about once per millisecond while a wait yields (e.g. to drive MPI
  // progress for a peer, core/mpi/team.cc). May be empty.
  std::function<void()> idle;
};

}  // namespace mlxa2a::mlx5
