// mlxa2a::rcache — per-thread pin counters, so that taking a reference on a cache hit
// needs no atomic read-modify-write.
//
// Each thread owns one PinTable per cache and is the only writer of it (a relaxed load
// and a relaxed store: plain moves on x86). A region's pin count is the sum over all
// tables; a Ref released on another thread than the one that took it simply leaves +1
// in one table and -1 in the other. Only the cache's writer (under its mutex) sums.
#pragma once

#include <atomic>
#include <cstdint>

namespace mlxa2a::rcache::detail {

class PinTable {
 public:
  static constexpr uint32_t kChunkBits = 10;
  static constexpr uint32_t kChunks = 4096;  // => at most 4M region ids
  static constexpr uint32_t kMaxIds = kChunks << kChunkBits;

  PinTable() = default;
  ~PinTable();
  PinTable(const PinTable&) = delete;
  PinTable& operator=(const PinTable&) = delete;

  // Owner thread only.
  void add(uint32_t id, int32_t delta) {
    std::atomic<int32_t>& c = counter(id);
    c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
  // Any thread.
  [[nodiscard]] int32_t get(uint32_t id) const {
    const std::atomic<int32_t>* chunk = chunks_[id >> kChunkBits].load(std::memory_order_acquire);
    return chunk == nullptr ? 0 : chunk[id & ((1u << kChunkBits) - 1)].load(std::memory_order_relaxed);
  }

 private:
  std::atomic<int32_t>& counter(uint32_t id) {
    std::atomic<int32_t>* chunk = chunks_[id >> kChunkBits].load(std::memory_order_relaxed);
    if (chunk == nullptr) chunk = grow(id >> kChunkBits);
    return chunk[id & ((1u << kChunkBits) - 1)];
  }
  std::atomic<int32_t>* grow(uint32_t chunk_index);

  std::atomic<std::atomic<int32_t>*> chunks_[kChunks] = {};
};

}  // namespace mlxa2a::rcache::detail
