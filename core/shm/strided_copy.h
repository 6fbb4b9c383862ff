// Strided block copies for fan-in/fan-out: every rank places its blocks
// straight into a leader's aggregated layout (and picks its results out of
// it), so the per-element transposition is spread over all ranks of a node
// instead of being done by one leader (docs/shm.md, DESIGN.md cost model).
//
// Contract: plain memory copies, no synchronisation; source and destination
// blocks must not overlap. Thread-safe (no state).
#pragma once

#include <cstddef>
#include <cstring>

namespace mlxa2a::shm {

// Copies `count` blocks of `block` bytes: block i goes from
// src + i * src_stride to dst + i * dst_stride.
inline void copy_blocks(void* dst, std::size_t dst_stride, const void* src, std::size_t src_stride,
                        std::size_t block, std::size_t count) noexcept {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (block == 0 || count == 0) return;
  if (dst_stride == block && src_stride == block) {  // both contiguous: one copy
    std::memcpy(d, s, block * count);
    return;
  }
  // Tiny blocks (the 1-byte alltoall case) cost more in memcpy calls than in
  // bytes: copy them with fixed-size moves the compiler inlines.
  switch (block) {
    case 1:
      for (std::size_t i = 0; i < count; ++i) d[i * dst_stride] = s[i * src_stride];
      return;
    case 2:
      for (std::size_t i = 0; i < count; ++i) std::memcpy(d + i * dst_stride, s + i * src_stride, 2);
      return;
    case 4:
      for (std::size_t i = 0; i < count; ++i) std::memcpy(d + i * dst_stride, s + i * src_stride, 4);
      return;
    case 8:
      for (std::size_t i = 0; i < count; ++i) std::memcpy(d + i * dst_stride, s + i * src_stride, 8);
      return;
    default:
      for (std::size_t i = 0; i < count; ++i)
        std::memcpy(d + i * dst_stride, s + i * src_stride, block);
  }
}

}  // namespace mlxa2a::shm
