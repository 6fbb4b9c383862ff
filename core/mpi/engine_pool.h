// EnginePool: engines kept after their communicator is freed and reused by a
// later team of the same processes in the same rank order, so that
// MPI_Comm_dup/split + first MPI_Alltoall + MPI_Comm_free neither creates,
// populates and unmaps a shared-memory segment (single-node teams) nor builds
// a staging segment, a leaders' communicator and a transport (multi-node
// teams) every time (issue 11, item 4; docs/shm.md, "Engine pool").
//
// Contract
// * An engine is kept under its PoolKey (core/mpi/engine.h; Team computes
//   it). Only a communicator with exactly this key, on every rank, may take
//   it: then its ranks are the processes the engine was built for, each at
//   its rank.
// * give(): takes an engine whose team is gone (Team's destructor). Kept idle
//   if it is poolable() with a pool_id() (LocalEngine never is), the key is
//   not empty, the pool holds fewer than capacity() engines and MPI is not
//   finalising; otherwise destroyed at once. The oldest idle engine goes
//   when the pool is full. Local, never blocks, never throws. An engine
//   destroyed while its peers keep theirs idle is harmless: no rank can take
//   an engine unless every rank proposes it.
// * acquire(): collective over comm (one PMPI_Allreduce of two uint64) when
//   capacity() > 0 (MLXA2A_SHM_POOL is all-equal, so every rank agrees on
//   whether to call it); returns nullptr without communicating otherwise.
//   Every rank proposes its idle engine kept under the same key (the lowest
//   id if several); if every rank proposes the same id, every rank takes its
//   engine out of the pool, rebinds it to opt's abort callback (the new
//   communicator's), marks it reused and returns it; otherwise every rank
//   returns nullptr and the proposals stay idle. The reused engine continues
//   its call numbering, equal on all its ranks since every rank completed
//   the same calls on the freed communicator, so reuse is as safe as
//   back-to-back calls. What a multi-node engine owns besides its segment
//   (its leaders' communicator, the containment's duplicate, the transport
//   and its registrations) was made from the freed communicator's group,
//   which is the new one's: it serves the new one as it served the old.
// * clear(): destroys every idle engine and refuses later ones (MPI_Finalize,
//   before the RDMA endpoint pool goes).
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
