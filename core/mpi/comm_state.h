// CommState: what mlxa2a keeps per communicator, stored as an MPI attribute
// (keyval + delete callback) — never in a map keyed by handle values, which MPI
// reuses after MPI_Comm_free.
//
// Ownership: the attribute owns the CommState; MPI calls the delete callback
// when the communicator is freed (or at MPI_Finalize for the predefined ones).
// Thread safety: one CommState is used only by calls on its communicator, which
// MPI requires to be serialised.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "core/mpi/team.h"
#include "core/selection.h"

namespace mlxa2a::core::mpi {

struct CommState {
  std::uint64_t id = 0;     // per-process sequence number, for traces
  std::uint64_t calls = 0;  // alltoall calls seen on this communicator
  Capabilities caps;        // agreed by all ranks of the communicator
  bool inter = false;       // an intercommunicator: always PMPI
  std::unique_ptr<Team> team;  // intracommunicators; owns the shm engine
};

// MPI delete callback for the comm keyval.
int comm_state_delete(MPI_Comm comm, int keyval, void* attr, void* extra);

// The state of comm, created on first use. Collective when it creates (every
// rank reaches this at the same call on comm): an intracommunicator's Team is
// built then (core/mpi/team.h). nullptr on an MPI error.
CommState* comm_state(MPI_Comm comm, int keyval);

// After MPI_Comm_split returned child (not MPI_COMM_NULL): if parent already has
// a team, attaches to child a state whose team is derived from it (no
// communication; see Team::derive). Otherwise does nothing and the child's
// state is built at its first alltoall. Local; never fails visibly.
void derive_comm_state(MPI_Comm parent, MPI_Comm child, int keyval);

}  // namespace mlxa2a::core::mpi
