#include "core/status.h"

namespace mlxa2a {

const char* to_string(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::bootstrap_failed: return "bootstrap failed";
    case Status::create_failed: return "shared-memory segment creation failed";
    case Status::peer_dead: return "a local peer process died";
    case Status::peer_failed: return "a local peer reported a failure";
    case Status::timeout: return "timed out waiting for a peer";
    case Status::aborted: return "aborted on request";
    case Status::cma_failed: return "process_vm_readv failed";
    case Status::broken: return "unusable after an earlier failure";
    case Status::transport_failed: return "the leaders' inter-node exchange failed";
    case Status::unavailable: return "RDMA is not available in this process";
    case Status::net_failed: return "an RDMA operation failed";
    case Status::size_mismatch:
      return "a peer's bytes per peer differ from this rank's (mismatched type signatures)";
    case Status::peer_in_pmpi:
      return "another rank of the call was sent to PMPI_Alltoall (mixed decisions)";
    case Status::contended:
      return "another team's set-up was using a resource this one needs";
    case Status::too_large:
      return "the shared-memory layout does not fit in memory (MLXA2A_SHM_SLOT_SIZE x ranks)";
  }
  return "unknown status";
}

}  // namespace mlxa2a
