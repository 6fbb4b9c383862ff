#include "core/mpi/comm_state.h"

#include <new>

#include "core/log.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

int comm_state_delete(MPI_Comm, int, void* attr, void*) {
  delete static_cast<CommState*>(attr);
  return MPI_SUCCESS;
}

CommState* comm_state(MPI_Comm comm, int keyval) {
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &attr, &found) != MPI_SUCCESS) return nullptr;
  if (found) return static_cast<CommState*>(attr);
  auto* state = new (std::nothrow) CommState;
  if (!state) return nullptr;
  state->id = Runtime::instance().next_comm_id();
  // Engines come with their teams (issue 4 and later); until a team is built the
  // communicator can run none, on every rank alike.
  state->caps = Capabilities{};
  if (PMPI_Comm_set_attr(comm, keyval, state) != MPI_SUCCESS) {
    delete state;
    return nullptr;
  }
  return state;
}

}  // namespace mlxa2a::core::mpi
