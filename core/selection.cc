#include "core/selection.h"

namespace mlxa2a::core {

using config::tune::Path;

Decision select(std::uint64_t bytes, const config::tune::Table& tune, const Capabilities& caps) {
  switch (tune.lookup(bytes)) {
    case Path::Pmpi:
      return {Path::Pmpi, "MLXA2A_TUNE selects pmpi for this size"};
    case Path::Shm:
      if (caps.shm) return {Path::Shm, "MLXA2A_TUNE selects shm"};
      if (caps.hier) return {Path::Shm, "MLXA2A_TUNE selects shm: hierarchical, leaders over PMPI"};
      return {Path::Pmpi, "MLXA2A_TUNE selects shm but its set-up failed"};
    case Path::Rdma:
      if (caps.rdma) return {Path::Rdma, "MLXA2A_TUNE selects rdma"};
      return {Path::Pmpi, "MLXA2A_TUNE selects rdma but the RDMA engine is not available"};
    case Path::Auto:
      break;
  }
  if (caps.shm && (bytes < caps.shm_auto_from || bytes >= caps.shm_auto_limit)) {
    return {Path::Pmpi, "auto: PMPI is faster at this size on an oversubscribed node"};
  }
  if (caps.shm) return {Path::Shm, "auto: single-node team"};
  if (caps.rdma) return {Path::Rdma, "auto: multi-node team"};
  if (caps.hier && bytes < caps.hier_auto_limit) {
    return {Path::Shm, "auto: multi-node team, hierarchical: leaders over PMPI"};
  }
  if (caps.hier && caps.hier_auto_limit == 0) {
    return {Path::Pmpi, "auto: multi-node team, about one rank per node: nothing to aggregate"};
  }
  if (caps.hier) return {Path::Pmpi, "auto: multi-node team, PMPI is faster at this size"};
  if (caps.nodes > 1) return {Path::Pmpi, "auto: multi-node team, hierarchical set-up failed"};
  if (caps.nodes == 1) return {Path::Pmpi, "auto: shared-memory set-up failed"};
  return {Path::Pmpi, "auto: no engine available for this team"};
}

}  // namespace mlxa2a::core
