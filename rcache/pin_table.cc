#include "rcache/pin_table.h"

namespace mlxa2a::rcache::detail {

PinTable::~PinTable() {
  for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
}

std::atomic<int32_t>* PinTable::grow(uint32_t chunk_index) {
  auto* chunk = new std::atomic<int32_t>[1u << kChunkBits]();
  // Release: a summing writer that sees the chunk sees it zeroed.
  chunks_[chunk_index].store(chunk, std::memory_order_release);
  return chunk;
}

}  // namespace mlxa2a::rcache::detail
