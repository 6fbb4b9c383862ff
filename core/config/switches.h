// The switch table (switches.cc): every MLXA2A_* variable, in one place, so
// that mlxa2a_info, the README and the runtime cannot disagree. Settings is
// its typed snapshot for the hot path, built once from a loaded Registry and
// then only read; a row with a `store` fills its field itself (the network,
// shared-memory and registration-cache switches: one row and one field each of
// NetSwitches, ShmSwitches and RcacheSwitches, core/config/{net,shm,rcache}.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/config/leaders.h"
#include "core/config/net.h"
#include "core/config/node_layout.h"
#include "core/config/rcache.h"
#include "core/config/registry.h"
#include "core/config/shm.h"
#include "core/config/spec.h"
#include "core/config/rules.h"
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
  rules::Table tune;
  unsigned tune_samples = 3;         // MLXA2A_TUNE_SAMPLES; 0 = no measurement
  std::string tune_file;             // MLXA2A_TUNE_FILE; empty = none
  std::string tune_site_dir;         // MLXA2A_TUNE_SITE_DIR; empty = no site file
  bool tune_stamp = false;           // MLXA2A_TUNE_STAMP
  std::string debug_tune_times;      // MLXA2A_DEBUG_TUNE_TIMES (tests only)
  NetSwitches net;  // MLXA2A_NET_*: the RDMA leader exchange, zero-copy, pipelining
  RcacheSwitches rcache;  // MLXA2A_RCACHE_*: zero-copy's registration cache (docs/rcache.md)
  ShmSwitches shm;        // MLXA2A_SHM_*: the shared-memory stage and the engine pool
  LeaderPolicy leaders;    // MLXA2A_LEADERS
  NodeLayout node_layout;  // MLXA2A_DEBUG_NODE_SIZE (tests only)
};

Settings settings_from(const Registry& registry);

}  // namespace mlxa2a::core::config
