// The switch table: every MLXA2A_* variable mlxa2a understands, in one place, so
// that mlxa2a_info, the README and the runtime cannot disagree. A module that
// needs a new switch adds a row here and a field to Settings.
//
// Settings is the typed snapshot the runtime reads on the hot path (no string
// lookups); it is built once from a loaded Registry and then only read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/config/leaders.h"
#include "core/config/node_layout.h"
#include "core/config/registry.h"
#include "core/config/spec.h"
#include "core/config/tune.h"
#include "core/log.h"

namespace mlxa2a::core::config {

std::span<const Spec> all_switches();

enum class CollTrace : std::uint8_t { None, Info, Debug };

// The two switches a running job may change (Spec::runtime_writable).
log::Level log_level_of(const Registry& r);
CollTrace coll_trace_of(const Registry& r);

struct Settings {
  bool enable = true;
  log::Level log_level = log::Level::Warn;
  std::string log_file;
  CollTrace coll_trace = CollTrace::None;
  bool coll_stats = false;       // the per-rank "stats" lines (y, json)
  bool coll_stats_json = false;  // MLXA2A_COLL_STATS=json[:path] on this rank
  std::string coll_stats_path;   // where rank 0 writes the job report
  tune::Table tune;
  unsigned tune_samples = 3;         // MLXA2A_TUNE_SAMPLES; 0 = no measurement
  std::string tune_file;             // MLXA2A_TUNE_FILE; empty = none
  std::string debug_tune_times;      // MLXA2A_DEBUG_TUNE_TIMES (tests only)
  std::vector<Device> net_devices;  // empty: all
  // The RDMA leader exchange (core/mlx5/options.h).
  int net_gid_index = -1;
  std::uint32_t net_timeout_ms = 120000;
  std::uint8_t net_qp_timeout = 18;
  std::uint8_t net_retry_count = 7;
  int net_traffic_class = -1;  // MLXA2A_NET_TRAFFIC_CLASS; -1: 106 on RoCE, 0 on IB
  int net_service_level = 0;   // MLXA2A_NET_SL
  int net_pkey = -1;           // MLXA2A_NET_PKEY; -1: first full-member entry
  std::string net_verbs_library = "libibverbs.so.1";
  // Zero-copy send side (docs/zerocopy.md): bytes per peer from which the
  // fixed rules take it; 0 = never, and no shared PD is set up.
  std::uint64_t net_zcopy_threshold = 0;
  // Pipelined rounds of the hierarchical engine (docs/hier.md).
  bool net_pipeline = true;
  // Registration cache (rcache/), see docs/rcache.md.
  std::uint64_t rcache_align = 16;
  std::int64_t rcache_max_regions = 0;
  std::uint64_t rcache_max_bytes = 0;
  std::string rcache_invalidation;
  // Shared-memory alltoall (core/shm/options.h); 0 threshold = never CMA.
  std::uint64_t shm_cma_threshold = 65536;
  std::uint64_t shm_cma_threshold_oversubscribed = 0;
  std::uint64_t shm_slot_size = 131072;
  std::uint64_t shm_slot_size_oversubscribed = 524288;
  unsigned shm_pool = 2;  // MLXA2A_SHM_POOL: idle segments kept per process
  LeaderPolicy leaders;    // MLXA2A_LEADERS
  NodeLayout node_layout;  // MLXA2A_DEBUG_NODE_SIZE (tests only)
};

Settings settings_from(const Registry& registry);

}  // namespace mlxa2a::core::config
