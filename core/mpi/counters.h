// Process-wide counters of the RDMA exchange and the zero-copy send side, read
// for MLXA2A_COLL_STATS's lines and for MPI_T performance variables
// (core/mpi/mpit.h). Each read is a snapshot of relaxed counters.
#pragma once

#include <cstdint>

namespace mlxa2a::core::mpi {

struct RdmaCounters {
  std::uint64_t writes = 0;
  std::uint64_t bytes = 0;
  std::uint64_t qps_created = 0;
  long qps_live = 0;
  long mrs_live = 0;
  std::uint64_t relayed = 0;  // messages sent through PMPI after their write failed
  std::uint64_t setup_bytes = 0;        // RDMA set-ups' collectives, sent + received
  std::uint64_t setup_collectives = 0;
  // Threads (docs/hier.md, "Threads"): most threads waiting in RDMA
  // exchanges at once, polls that found another thread polling the CQ.
  std::uint64_t peak_waiters = 0;
  std::uint64_t polls_contended = 0;
  std::uint64_t stripes_posted = 0;  // messages cut into stripes (MLXA2A_NET_STRIPES)
};
// Zeros when the shim was built without rdma-core headers.
RdmaCounters rdma_counters() noexcept;

struct ZeroCopyStats {
  std::uint64_t copied = 0, zero_copy = 0, staged = 0;
  std::uint64_t hits = 0, misses = 0, evictions = 0, invalidations = 0, refused = 0;
};
ZeroCopyStats zero_copy_stats() noexcept;

}  // namespace mlxa2a::core::mpi
