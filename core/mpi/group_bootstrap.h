// GroupBootstrap over an MPI communicator: PMPI_Allgather, set-up only.
//
// Contract: borrows comm (the caller keeps it alive for the object's life);
// the members are the communicator's ranks. Not thread-safe.
#pragma once

#include <mpi.h>

#include <climits>

#include "core/bootstrap.h"

namespace mlxa2a::core::mpi {

class MpiGroupBootstrap final : public GroupBootstrap {
 public:
  explicit MpiGroupBootstrap(MPI_Comm comm) : comm_(comm) {
    PMPI_Comm_rank(comm, &rank_);
    PMPI_Comm_size(comm, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool allgather(const void* mine, void* all, std::size_t len) override {
    if (len > INT_MAX) return false;  // set-up cards are a few hundred bytes
    return PMPI_Allgather(mine, static_cast<int>(len), MPI_BYTE, all, static_cast<int>(len),
                          MPI_BYTE, comm_) == MPI_SUCCESS;
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace mlxa2a::core::mpi
