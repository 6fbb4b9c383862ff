#include "core/mpi/containment.h"

#include <sched.h>

#include <chrono>
#include <cstdio>

#include "core/log.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

Containment::~Containment() {
  // Inside MPI_Finalize communicators may no longer be freed (as
  // PmpiLeaderTransport).
  if (Runtime::instance().state() == mpi::State::Finalised) {
    comm_.abandon();
    return;
  }
  // A communicator must not be freed under a pending collective (Open MPI's
  // libnbc then crashes in MPI_Finalize): let the agreement complete — every
  // rank that failed posts within about one NET_TIMEOUT — or, failing that,
  // leave the communicator allocated.
  if (phase_ == Phase::pending && request_ != MPI_REQUEST_NULL) {
    if (!wait(std::chrono::milliseconds(2ull * timeout_ms_))) {
      MLXA2A_LOG(Warn, "RDMA containment: the agreement did not complete before the "
                       "communicator was freed; its duplicate is left allocated");
      comm_.abandon();
    }
  }
}

bool Containment::wait(std::chrono::milliseconds limit) noexcept {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (int done = 0;;) {
    if (PMPI_Test(&request_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (Clock::now() - start > limit) return false;
    sched_yield();
  }
}

bool Containment::arm(MPI_Comm comm, std::uint32_t timeout_ms) noexcept {
  timeout_ms_ = timeout_ms;
  if (PMPI_Comm_dup(comm, comm_.out()) != MPI_SUCCESS) {
    comm_.abandon();
    return false;
  }
  PMPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN);
  return true;
}

void Containment::fail(std::uint64_t call, const char* what) noexcept {
  if (phase_ != Phase::idle || !armed()) return;
  failed_ = call;
  mine_[0] = static_cast<long long>(call);
  mine_[1] = -mine_[0];
  try {
    what_ = what;
  } catch (...) {
  }
  phase_ = Phase::pending;
  if (PMPI_Iallreduce(mine_, all_, 2, MPI_LONG_LONG, MPI_MAX, comm_.get(), &request_) !=
      MPI_SUCCESS) {
    MLXA2A_LOG(Error, "RDMA containment: posting the agreement failed");
    request_ = MPI_REQUEST_NULL;
  }
  MLXA2A_LOG(Warn, "RDMA failed at engine call %llu (%s); later calls go through PMPI",
             static_cast<unsigned long long>(call), what);
}

void Containment::agree() noexcept {
  // Every rank normally joins within one NET_TIMEOUT of this rank's wait
  // (ranks whose call succeeded fail their next one after at most that
  // long, plus the skew entering it): four is generous.
  const auto limit = std::chrono::milliseconds(4ull * timeout_ms_);
  bool ok = request_ != MPI_REQUEST_NULL && wait(limit);
  if (!ok && request_ != MPI_REQUEST_NULL) {
    int done = 0;
    if (PMPI_Test(&request_, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
      MLXA2A_LOG(Error,
                 "RDMA containment: the communicator's other ranks did not confirm the failure "
                 "of engine call %llu within %lld ms; aborting rather than hanging or pairing "
                 "later calls wrongly",
                 static_cast<unsigned long long>(failed_), static_cast<long long>(limit.count()));
      PMPI_Abort(comm_.get(), MPI_ERR_OTHER);
    }
  }
  if (!ok) {
    // Only a broken MPI gets here; PMPI then reports what is wrong.
    MLXA2A_LOG(Error, "RDMA containment: the agreement failed");
    all_[0] = mine_[0];
    all_[1] = mine_[1];
  }
  phase_ = Phase::agreed;
  last_ = static_cast<std::uint64_t>(all_[0]);
  const auto first = static_cast<unsigned long long>(-all_[1]);
  char text[200];
  if (first == last_) {
    std::snprintf(text, sizeof text, "RDMA failed at engine call %llu (%s): PMPI from then on",
                  first, what_.c_str());
  } else {
    std::snprintf(text, sizeof text,
                  "RDMA failed at engine calls %llu-%llu (here %llu: %s): PMPI from then on",
                  first, static_cast<unsigned long long>(last_),
                  static_cast<unsigned long long>(failed_), what_.c_str());
  }
  try {
    why_ = text;
  } catch (...) {
  }
  MLXA2A_LOG(Info, "%s", text);
}

Containment::Outcome Containment::substitute(std::uint64_t call) noexcept {
  if (phase_ == Phase::pending) agree();
  return call <= last_ ? Outcome::fail : Outcome::pmpi;
}

}  // namespace mlxa2a::core::mpi
