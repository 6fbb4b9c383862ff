// The set-up bootstraps over an MPI communicator: GroupBootstrap
// (core/bootstrap.h) through PMPI_Allgather, and the shm Bootstrap
// (core/shm/bootstrap.h) through PMPI_Bcast/PMPI_Barrier on a node
// communicator. Set-up only.
//
// Contract: both borrow comm (the caller keeps it alive for the object's
// life); the members are the communicator's ranks. Not thread-safe.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>

#include "core/bootstrap.h"
#include "core/shm/bootstrap.h"

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
  bool alltoall(const void* mine, void* theirs, std::size_t len) override {
    if (len > INT_MAX) return false;
    return PMPI_Alltoall(mine, static_cast<int>(len), MPI_BYTE, theirs, static_cast<int>(len),
                         MPI_BYTE, comm_) == MPI_SUCCESS;
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

class MpiBootstrap final : public shm::Bootstrap {
 public:
  MpiBootstrap(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  bool broadcast(void* buf, std::size_t len, int root) override {
    // Set-up messages are a few hundred bytes; never near INT_MAX.
    return PMPI_Bcast(buf, static_cast<int>(len), MPI_BYTE, root, comm_) == MPI_SUCCESS;
  }
  bool barrier() override { return PMPI_Barrier(comm_) == MPI_SUCCESS; }

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
};

}  // namespace mlxa2a::core::mpi
