// The MLXA2A_SHM_* switches as one plain struct, filled once from the switch
// table (each SHM_ row of core/config/switches.cc names its field here) and
// carried whole by Settings and EngineSettings; core/shm converts it into
// shm::Options in one place (shm::options_from, core/shm/options.h).
//
// Plain data with no project includes, so core/shm may include it (the layers
// test allows exactly this config header there).
#pragma once

#include <cstdint>

namespace mlxa2a::core::config {

// Defaults equal the rows' default texts (a unit test compares them).
struct ShmSwitches {
  std::uint64_t cma_threshold = 65536;             // MLXA2A_SHM_CMA_THRESHOLD; 0: never CMA
  std::uint64_t cma_threshold_oversubscribed = 0;  // MLXA2A_SHM_CMA_THRESHOLD_OVERSUBSCRIBED
  // Also the hierarchical engine's staging bytes per rank and round.
  std::uint64_t slot_size = 131072;                 // MLXA2A_SHM_SLOT_SIZE
  std::uint64_t slot_size_oversubscribed = 524288;  // MLXA2A_SHM_SLOT_SIZE_OVERSUBSCRIBED
  unsigned pool = 2;  // MLXA2A_SHM_POOL: idle engines kept per process (core/mpi)
  friend bool operator==(const ShmSwitches&, const ShmSwitches&) = default;
};

}  // namespace mlxa2a::core::config
