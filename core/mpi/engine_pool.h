// EnginePool: single-node engines kept after their communicator is freed and
// reused by a later team of the same processes in the same rank order, so
// that MPI_Comm_dup/split + first MPI_Alltoall + MPI_Comm_free does not
// create, populate and unmap a shared-memory segment every time (issue 11,
// item 4; docs/shm.md, "Engine pool").
//
// Contract
// * An engine is kept under its members: the MPI_COMM_WORLD ranks of its
//   communicator in rank order (Team computes them), and the oversubscribed
//   flag. Only a communicator with exactly these members in this order, on
//   every rank, may take it: then its ranks are the processes attached to the
//   segment, each at its local rank.
// * give(): takes a NodeAlltoall whose team is gone (Team's destructor).
//   Kept idle if it is healthy (not broken, its node's failure flag clear),
//   has more than one rank, members is not empty, the pool holds fewer than
//   capacity() engines and MPI is not finalising; otherwise destroyed
//   (unmapped) at once. The oldest idle engine goes when the pool is full.
//   Local, never blocks, never throws.
// * acquire(): collective over comm (one PMPI_Allreduce of two uint64) when
//   capacity() > 0 (MLXA2A_SHM_POOL is all-equal, so every rank agrees on
//   whether to call it); returns nullptr without communicating otherwise.
//   Every rank proposes its idle engine kept under the same members (the
//   lowest id if several); if every rank proposes the same id, every rank
//   takes its engine out of the pool, rebinds it to opt's abort callback (the
//   new communicator's) and returns it; otherwise every rank returns nullptr
//   and the proposals stay idle. The reused engine continues its call
//   numbering, equal on all its ranks since every rank completed the same
//   calls on the freed communicator, so reuse is as safe as back-to-back
//   calls.
// * clear(): destroys every idle engine and refuses later ones (MPI_Finalize).
// * Thread-safe: one mutex, not held across the allreduce; an engine under
//   proposal is reserved, so concurrent acquire()s (other communicators) on
//   other threads never take the same one.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/shm/node_alltoall.h"
#include "core/shm/options.h"

namespace mlxa2a::core::mpi {

class EnginePool {
 public:
  static EnginePool& instance() noexcept;

  // MLXA2A_SHM_POOL: idle engines kept per process (0: no pool).
  void set_capacity(std::size_t n) noexcept;
  std::size_t capacity() const noexcept;

  struct Members {
    std::vector<int> world_ranks;  // in the communicator's rank order
    bool oversubscribed = false;
    bool operator==(const Members&) const = default;
  };
  void give(std::unique_ptr<shm::NodeAlltoall> engine, Members members) noexcept;
  std::unique_ptr<shm::NodeAlltoall> acquire(MPI_Comm comm, const Members& members,
                                             const shm::Options& opt) noexcept;
  void clear() noexcept;
  std::size_t idle() const noexcept;

 private:
  EnginePool() = default;
  struct Entry {
    std::unique_ptr<shm::NodeAlltoall> engine;
    std::uint64_t id;
    Members members;
    bool reserved;  // proposed by an acquire() in progress
  };
  mutable std::mutex mutex_;
  std::size_t capacity_ = 0;
  bool closed_ = false;  // after clear(): MPI is finalising
  std::vector<Entry> idle_;
};

}  // namespace mlxa2a::core::mpi
