#include "core/mpi/engine_pool.h"

#include <algorithm>
#include <utility>

namespace mlxa2a::core::mpi {

EnginePool& EnginePool::instance() noexcept {
  static EnginePool pool;  // plain memory; clear() unmaps before finalize ends
  return pool;
}

void EnginePool::set_capacity(std::size_t n) noexcept {
  std::lock_guard lock(mutex_);
  capacity_ = n;
  closed_ = false;
}

std::size_t EnginePool::capacity() const noexcept {
  std::lock_guard lock(mutex_);
  return capacity_;
}

std::size_t EnginePool::idle() const noexcept {
  std::lock_guard lock(mutex_);
  return idle_.size();
}

void EnginePool::give(std::unique_ptr<Engine> engine, PoolKey key) noexcept {
  const EnginePooling* pooling = engine ? engine->pooling() : nullptr;
  if (!pooling || pooling->pool_id() == 0 || !pooling->poolable() || key.world_ranks.empty()) {
    return;
  }
  std::unique_ptr<Engine> dropped;  // destroyed outside the lock
  std::lock_guard lock(mutex_);
  if (closed_ || capacity_ == 0) return;
  try {
    if (idle_.size() >= capacity_) {
      // The oldest not under proposal; none: the newcomer goes instead.
      const auto old = std::find_if(idle_.begin(), idle_.end(),
                                    [](const Entry& e) { return !e.reserved; });
      if (old == idle_.end()) return;
      dropped = std::move(old->engine);
      idle_.erase(old);
    }
    const std::uint64_t id = pooling->pool_id();
    idle_.push_back(Entry{std::move(engine), id, std::move(key), false});
  } catch (...) {
    // push_back's allocation only; the engine is then destroyed here.
  }
}

std::unique_ptr<Engine> EnginePool::acquire(MPI_Comm comm, const PoolKey& key,
                                            const shm::Options& opt) noexcept {
  std::uint64_t proposal = 0;  // 0: none (ids are never 0)
  {
    std::lock_guard lock(mutex_);
    if (capacity_ == 0) return nullptr;  // on every rank: the switch is all-equal
    Entry* best = nullptr;
    for (Entry& e : idle_) {
      if (!e.reserved && !key.world_ranks.empty() && e.key == key && e.engine->pooling()->poolable() &&
          (!best || e.id < best->id)) {
        best = &e;
      }
    }
    // Reserved while the ranks agree, so that a concurrent acquire() by
    // another thread (another communicator) cannot take it meanwhile.
    if (best) {
      best->reserved = true;
      proposal = best->id;
    }
  }
  // Equal on every rank iff max(p) == min(p) = ~max(~p).
  std::uint64_t v[2] = {proposal, ~proposal};
  // MPI failing here breaks the segment creation that follows alike.
  const bool agreed = PMPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, comm) ==
                          MPI_SUCCESS &&
                      proposal != 0 && v[0] == proposal && v[1] == ~proposal;
  if (proposal == 0) return nullptr;
  std::unique_ptr<Engine> engine;
  {
    std::lock_guard lock(mutex_);
    // Reserved entries are removed only here, by the thread that reserved
    // them (clear() runs at finalize, after every communicator's calls).
    const auto it = std::find_if(idle_.begin(), idle_.end(),
                                 [&](const Entry& e) { return e.id == proposal; });
    if (it == idle_.end()) return nullptr;
    if (!agreed) {
      it->reserved = false;
      return nullptr;
    }
    engine = std::move(it->engine);
    idle_.erase(it);
  }
  engine->pooling()->rebind(opt);
  engine->mark_reused();
  return engine;
}

void EnginePool::clear() noexcept {
  std::vector<Entry> gone;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    gone.swap(idle_);
  }
}

}  // namespace mlxa2a::core::mpi
