#include "core/mpi/lifecycle.h"

#include "core/log.h"
#include "core/mpi/call.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/runtime.h"
#include "core/mpi/stacking.h"

namespace mlxa2a::core::mpi {

int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) noexcept {
  const int rc = mpi_own().comm_split(comm, color, key, newcomm);
  if (ReentryGuard::nested()) return rc;
  ReentryGuard guard;
  Runtime& rt = Runtime::instance();
  if (rc == MPI_SUCCESS && rt.state() == State::Active && *newcomm != MPI_COMM_NULL) {
    try {
      derive_comm_state(comm, *newcomm, rt.comm_keyval());
    } catch (...) {
    }
  }
  if (rc == MPI_SUCCESS && rt.state() != State::Uninitialised && rt.trace()) {
    try {
      const bool undefined = *newcomm == MPI_COMM_NULL;
      int size = 0;
      if (!undefined) PMPI_Comm_size(*newcomm, &size);
      log::trace("MPI_Comm_split parent=%s color=%d key=%d result=%s np=%d", comm_label(comm).c_str(),
                 color, key, undefined ? "MPI_COMM_NULL" : comm_label(*newcomm).c_str(), size);
    } catch (...) {
    }
  }
  return rc;
}

void after_init(int rc) noexcept {
  if (rc != MPI_SUCCESS) return;
  ReentryGuard guard;
  try {
    Runtime::instance().after_init();
  } catch (...) {
    MLXA2A_LOG(Error, "internal error during initialisation");
  }
}

int init(int* argc, char*** argv) noexcept {
  require_mpi_own();
  const int rc = mpi_own().init(argc, argv);
  after_init(rc);
  return rc;
}

int init_thread(int* argc, char*** argv, int required, int* provided) noexcept {
  require_mpi_own();
  const int rc = mpi_own().init_thread(argc, argv, required, provided);
  after_init(rc);
  return rc;
}

int finalize() noexcept {
  // Clean-up runs from the MPI_COMM_SELF delete callback inside PMPI_Finalize, so
  // Fortran programs (whose MPI_FINALIZE calls PMPI_Finalize directly) get it too.
  return PMPI_Finalize();
}

}  // namespace mlxa2a::core::mpi
