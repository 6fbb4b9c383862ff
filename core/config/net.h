// The MLXA2A_NET_* switches as one plain struct: filled once from the switch
// table (each row of core/config/switches.cc names its field here), carried
// whole by Settings and EngineSettings, and the base of what the RDMA
// transport is given (mlx5::NetOptions, core/mlx5/options.h). A new network
// switch is its row, its field and its use: no copies in between.
//
// Plain data with no project includes, so core/mlx5 may include it (the one
// config header it may; the layers test checks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlxa2a::core::config {

// One NIC port from MLXA2A_NET_DEVICES ("mlx5_0:1"); port 0 means any port.
struct NetPort {
  std::string device;
  int port = 0;
  friend bool operator==(const NetPort&, const NetPort&) = default;
};

// Defaults equal the rows' default texts (a unit test compares them).
struct NetSwitches {
  std::string verbs_library = "libibverbs.so.1";  // MLXA2A_NET_VERBS_LIBRARY
  std::vector<NetPort> devices;  // MLXA2A_NET_DEVICES; empty: first ACTIVE port of any device
  int gid_index = -1;            // MLXA2A_NET_GID_INDEX; -1: matched by subnet (core/mlx5/gid_choice.h)
  // MLXA2A_DEBUG_CARD_FORMAT (tests): the set-up card format claimed; 0: this
  // build's (core/mlx5/setup_card.h).
  std::uint32_t debug_card_format = 0;
  // MLXA2A_NET_TIMEOUT: bounds set-up hand-overs and the containment
  // agreement; a partner's data is waited for without a limit (keepalive_ms).
  std::uint32_t timeout_ms = 120000;
  std::uint32_t keepalive_ms = 2000;  // MLXA2A_NET_KEEPALIVE: probe an awaited partner's QP
  std::uint8_t qp_timeout = 18;       // MLXA2A_NET_QP_TIMEOUT: 4.096 us * 2^n per retry
  std::uint8_t retry_count = 7;       // MLXA2A_NET_RETRY_COUNT
  // MLXA2A_NET_RC_QP_BUDGET: RC queue pairs a process may hold; 0: from the
  // HCA's max_qp and the ranks per node (core/mlx5/qp_budget.h).
  std::uint32_t rc_qp_budget = 0;
  // The fabric's QoS and partition (core/mlx5/qos.h), UCX's defaults:
  int traffic_class = -1;  // MLXA2A_NET_TRAFFIC_CLASS; -1: 106 on RoCE, 0 on InfiniBand
  int service_level = 0;   // MLXA2A_NET_SL
  int pkey = -1;           // MLXA2A_NET_PKEY; -1: the first full-member P_Key
  // The hierarchical engine's (core/mpi/hier_engine.cc):
  std::uint64_t zcopy_threshold = 0;  // MLXA2A_NET_ZCOPY_THRESHOLD; 0: no zero-copy
  bool pipeline = true;               // MLXA2A_NET_PIPELINE (all-equal)
  std::uint64_t pmpi_piece = 61440;   // MLXA2A_NET_PMPI_PIECE (all-equal)
  // Staging bytes per rank and round when the leaders exchange over PMPI
  // (RDMA leaders: ShmSwitches::slot_size, which they pin). An explicit
  // MLXA2A_SHM_SLOT_SIZE is this too when this switch is not set (Spec::follows).
  std::uint64_t pmpi_slot_size = 524288;  // MLXA2A_NET_PMPI_SLOT_SIZE
  // The most /dev/shm bytes a node's staging segment may take with PMPI
  // leaders; 0: no limit (core/hier/stage_slot.h).
  std::uint64_t pmpi_stage_limit = std::uint64_t{64} << 20;  // MLXA2A_NET_PMPI_STAGE_LIMIT
  // Registration and posting (issue 39, item 6; docs/hier-transports.md,
  // "Registration and posting"): none changes a result.
  std::uint32_t inline_ask = 256;  // MLXA2A_NET_INLINE: inline bytes asked per QP; 0: none
  bool relaxed_ordering = true;    // MLXA2A_NET_RELAXED_ORDERING: out-area MRs, if the device takes it
  std::string hugepages = "auto";  // MLXA2A_NET_HUGEPAGES: the staging segment's pages
  // Stripes (docs/hier-transports.md, "Stripes"): RC QPs per node pair, and
  // the message bytes from which a message is cut over all of them.
  std::uint32_t stripes = 1;                      // MLXA2A_NET_STRIPES (all-equal)
  std::uint64_t stripe_min = std::uint64_t{256} << 10;  // MLXA2A_NET_STRIPE_MIN
  friend bool operator==(const NetSwitches&, const NetSwitches&) = default;
};

}  // namespace mlxa2a::core::config
