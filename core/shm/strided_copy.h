// Strided block copies for fan-in/fan-out: every rank places its blocks
// straight into a leader's aggregated layout (and picks its results out),
// spreading the transposition over all ranks of a node (docs/shm.md).
// Plain copies, no synchronisation, no state; blocks must not overlap.
//
// Not one memcpy per block: for 1-128-byte blocks the call and its size
// dispatch cost more than the bytes (bench/model_bench: 16-byte blocks 3.4
// ns each through memcpy, 0.8 with fixed-size moves the compiler inlines).
// Past 128 bytes memcpy's call cost is small against the bytes.
#pragma once

#include <cstddef>
#include <cstring>

namespace mlxa2a::shm {

namespace detail {

template <std::size_t N>
inline void move(char* d, const char* s) noexcept {
  std::memcpy(d, s, N);  // constant size: inlined as register moves
}

// n in [N, 2N]: the first N and the last N bytes (they overlap when n < 2N).
template <std::size_t N>
inline void move_between(char* d, const char* s, std::size_t n) noexcept {
  char head[N], tail[N];  // both loaded before either store: d and s never overlap anyway
  std::memcpy(head, s, N);
  std::memcpy(tail, s + n - N, N);
  std::memcpy(d, head, N);
  std::memcpy(d + n - N, tail, N);
}

// One block of 1-64 bytes.
inline void move_small(char* d, const char* s, std::size_t n) noexcept {
  if (n >= 16) {
    if (n >= 32) return move_between<32>(d, s, n);
    return move_between<16>(d, s, n);
  }
  if (n >= 8) return move_between<8>(d, s, n);
  if (n >= 4) return move_between<4>(d, s, n);
  if (n >= 2) return move_between<2>(d, s, n);
  *d = *s;
}

template <std::size_t N>
inline void copy_fixed(char* d, std::size_t dst_stride, const char* s, std::size_t src_stride,
                       std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i) move<N>(d + i * dst_stride, s + i * src_stride);
}

}  // namespace detail

// Contiguous runs of 64- or 128-byte blocks up to this length are moved
// block by block (below).
inline constexpr std::size_t kInlineRunBytes = 4096;

// Copies `count` blocks of `block` bytes: block i goes from
// src + i * src_stride to dst + i * dst_stride. Left to GCC's inlining:
// forced inline, bench/model_bench's fan-out ran 2 B and 12 B 1.6-2x slower.
inline void copy_blocks(void* dst, std::size_t dst_stride, const void* src, std::size_t src_stride,
                        std::size_t block, std::size_t count) noexcept {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (block == 0 || count == 0) return;
  if (dst_stride == block && src_stride == block) {  // both contiguous: one copy
    // Except short runs of line-sized blocks (a rotated fan-in row is two
    // runs, core/hier/rows.h), where fixed moves beat the second memcpy
    // (fan-in at 128 B: 2.4 -> 1.9-2.1 us). Tested as unlikely and on the
    // block size first: a test before the memcpy cost fan-in at 1-2 B 20%.
    if (block >= 64 && block * count <= kInlineRunBytes) [[unlikely]] {
      if (block == 64) return detail::copy_fixed<64>(d, block, s, block, count);
      if (block == 128) return detail::copy_fixed<128>(d, block, s, block, count);
    }
    std::memcpy(d, s, block * count);
    return;
  }
  switch (block) {  // the common power-of-two sizes: one fixed move per block
    case 1:
      return detail::copy_fixed<1>(d, dst_stride, s, src_stride, count);
    case 2:
      return detail::copy_fixed<2>(d, dst_stride, s, src_stride, count);
    case 4:
      return detail::copy_fixed<4>(d, dst_stride, s, src_stride, count);
    case 8:
      return detail::copy_fixed<8>(d, dst_stride, s, src_stride, count);
    case 16:
      return detail::copy_fixed<16>(d, dst_stride, s, src_stride, count);
    case 32:
      return detail::copy_fixed<32>(d, dst_stride, s, src_stride, count);
    case 64:
      return detail::copy_fixed<64>(d, dst_stride, s, src_stride, count);
    case 128:
      return detail::copy_fixed<128>(d, dst_stride, s, src_stride, count);
    default:
      break;
  }
  if (block < 64) {
    for (std::size_t i = 0; i < count; ++i) {
      detail::move_small(d + i * dst_stride, s + i * src_stride, block);
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i) std::memcpy(d + i * dst_stride, s + i * src_stride, block);
}

}  // namespace mlxa2a::shm
