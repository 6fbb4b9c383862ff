#include "core/mpi/counters.h"

#include <atomic>

#include "core/hier/zero_copy.h"
#if MLXA2A_HAVE_VERBS
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/relay_book.h"
#include "core/mlx5/zcopy_sender.h"
#endif

namespace mlxa2a::core::mpi {

RdmaCounters rdma_counters() noexcept {
#if MLXA2A_HAVE_VERBS
  const mlx5::PoolStats s = mlx5::EndpointPool::stats();
  return {s.writes_posted, s.bytes_written, s.qps_created, s.qps_live, s.mrs_live,
          mlx5::RelayBook::relayed_count(), s.setup_bytes, s.setup_collectives,
          s.peak_waiters, s.polls_contended, s.stripes_posted};
#else
  return {};
#endif
}

ZeroCopyStats zero_copy_stats() noexcept {
  const hier::NodeCopyCounters& n = hier::node_copy_counters();
  ZeroCopyStats z;
  z.copied = n.copied.load(std::memory_order_relaxed);
  z.zero_copy = n.zero_copy.load(std::memory_order_relaxed);
  z.staged = n.staged_fallbacks.load(std::memory_order_relaxed);
#if MLXA2A_HAVE_VERBS
  const mlx5::ZeroCopyCounters& c = mlx5::zero_copy_counters();
  z.hits = c.hits.load(std::memory_order_relaxed);
  z.misses = c.misses.load(std::memory_order_relaxed);
  z.evictions = c.evictions.load(std::memory_order_relaxed);
  z.invalidations = c.invalidations.load(std::memory_order_relaxed);
  z.refused = c.refused.load(std::memory_order_relaxed);
#endif
  return z;
}

}  // namespace mlxa2a::core::mpi
