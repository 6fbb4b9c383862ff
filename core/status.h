// mlxa2a's one status type. No exception ever leaves an engine (core/shm,
// core/hier, core/mlx5): every fallible call returns one of these, and
// core/mpi turns a failed call into MPI_ERR_OTHER through the communicator's
// error handler (size_mismatch into MPI_ERR_TRUNCATE, after the ranks agreed
// on a restart point). shm::Status is the same type (core/shm/status.h).
#pragma once

namespace mlxa2a {

enum class [[nodiscard]] Status {
  ok = 0,
  invalid_argument,   // caller broke a documented precondition; nothing moved
  bootstrap_failed,   // a set-up collective (Bootstrap, GroupBootstrap) failed
  create_failed,      // segment could not be created/attached on some rank
  peer_dead,          // a rank we waited for has exited
  peer_failed,        // another rank's run() failed (it set the node's failure flag)
  timeout,            // a wait passed its deadline (shm: Options::timeout_ms; net: MLXA2A_NET_TIMEOUT)
  aborted,            // Options::abort_requested returned true while waiting
  cma_failed,         // process_vm_readv failed after the probe said it works
  broken,             // an earlier run() failed; the instance is unusable
  transport_failed,   // the leaders' inter-node exchange failed (core/hier)
  unavailable,        // RDMA is not usable in this process (no library, device or port)
  net_failed,         // a verbs call or completion failed (core/mlx5)
  too_large,          // a layout's sizes overflow (switch values x ranks); nothing created
  size_mismatch,      // a peer called with another bytes_per_peer; see NodeAlltoall::resync
  peer_in_pmpi,       // a rank of the call was sent to PMPI_Alltoall (hierarchical engine,
                      // docs/hier.md "Sizes that differ"): this rank must join it there
  contended,          // set-up: another thread's team was setting up a resource this one
                      // needs (a pooled queue pair); the same set-up tried again can work
};

// Static string, never null.
const char* to_string(Status s) noexcept;

}  // namespace mlxa2a
