// Team: what mlxa2a knows about one intracommunicator to run engines on it —
// its node map, the agreed capabilities, and the shared-memory engine of this
// rank's node.
//
// Contract
// * Team::create() is collective over comm: every rank calls it at the same
//   alltoall call (the first one on comm that may use an engine). It always
//   ends with ONE PMPI_Allreduce over comm that agrees on the capabilities, so
//   every rank gets the same caps even when set-up failed on some rank; it
//   never throws. The node communicator used for set-up is freed before it
//   returns. A communicator of one rank makes no MPI call at all.
// * Ownership: CommState owns the Team; the comm keyval's delete callback
//   destroys it, which unmaps the shared-memory segment (its name was already
//   unlinked during set-up, so nothing is left in /dev/shm).
// * Thread safety: none needed — a Team is used only by collective calls on its
//   communicator, which MPI requires to be serialised.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>

#include "core/config/switches.h"
#include "core/selection.h"
#include "core/shm/node_alltoall.h"

namespace mlxa2a::core::mpi {

class Team {
 public:
  static std::unique_ptr<Team> create(MPI_Comm comm, const config::Settings& settings) noexcept;
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  const Capabilities& caps() const { return caps_; }
  int size() const { return size_; }
  // The node's shared-memory engine; nullptr when the communicator has one rank
  // (the engine is then a local copy) or caps().shm is false.
  shm::NodeAlltoall* node_alltoall() const { return shm_.get(); }
  bool oversubscribed() const { return oversubscribed_; }

  // Rank-local scratch space for packing MPI_IN_PLACE and non-contiguous data;
  // grows on demand and is kept for the next call. nullptr if allocation failed.
  char* scratch(int which, std::size_t bytes) noexcept;

 private:
  Team() = default;

  Capabilities caps_;
  int size_ = 1;
  bool oversubscribed_ = false;
  std::unique_ptr<shm::NodeAlltoall> shm_;
  struct Buffer {
    std::unique_ptr<char[]> data;
    std::size_t size = 0;
  };
  Buffer scratch_[2];
};

}  // namespace mlxa2a::core::mpi
