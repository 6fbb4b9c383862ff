// EnginePool: engines kept after their communicator is freed and reused by a
// later team of the same processes in the same rank order, so that
// MPI_Comm_dup/split + first MPI_Alltoall + MPI_Comm_free neither creates,
// populates and unmaps a shared-memory segment (single-node teams) nor builds
// a staging segment, a leaders' communicator and a transport (multi-node
// teams) every time (issue 11, item 4; docs/shm.md, "Engine pool").
//
// Contract
// * An engine is kept under its PoolKey (core/mpi/engine.h): only a
//   communicator with exactly that key on every rank may take it - its ranks
//   are then the processes the engine was built for, each at its rank.
// * give() (Team's destructor): keeps a poolable() engine with a pool_id()
//   and a key while fewer than capacity() are idle and MPI is not finalising
//   (the oldest goes when full); else destroys it. Local, never throws. One
//   rank destroying while its peers keep theirs is harmless: an engine is
//   taken only when every rank proposes it.
// * acquire(): collective over comm (one PMPI_Allreduce) when capacity() > 0
//   (MLXA2A_SHM_POOL is all-equal); nullptr without communicating otherwise.
//   Each rank proposes its idle engine under the key (lowest id); only if
//   all propose the same id does every rank take it, rebind it to opt's abort
//   callback and mark it reused. Its call numbering goes on, equal on all
//   ranks, so reuse is as safe as back-to-back calls; what it owns was made
//   from the freed communicator's group, which is the new one's.
// * clear(): destroys every idle engine and refuses later ones (MPI_Finalize,
//   before the RDMA endpoint pool goes).
// * Thread-safe: one mutex, not held across the allreduce; an engine under
//   proposal is reserved for its caller.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/mpi/engine.h"
#include "core/shm/options.h"

namespace mlxa2a::core::mpi {

class EnginePool {
 public:
  static EnginePool& instance() noexcept;

  // MLXA2A_SHM_POOL: idle engines kept per process (0: no pool).
  void set_capacity(std::size_t n) noexcept;
  std::size_t capacity() const noexcept;

  void give(std::unique_ptr<Engine> engine, PoolKey key) noexcept;
  std::unique_ptr<Engine> acquire(MPI_Comm comm, const PoolKey& key,
                                  const shm::Options& opt) noexcept;
  void clear() noexcept;
  std::size_t idle() const noexcept;

 private:
  EnginePool() = default;
  struct Entry {
    std::unique_ptr<Engine> engine;
    std::uint64_t id;
    PoolKey key;
    bool reserved;  // proposed by an acquire() in progress
  };
  mutable std::mutex mutex_;
  std::size_t capacity_ = 0;
  bool closed_ = false;  // after clear(): MPI is finalising
  std::vector<Entry> idle_;
};

}  // namespace mlxa2a::core::mpi
