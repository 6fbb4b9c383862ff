// Line mode: a writer's bytes spread over cache lines that each carry their
// own sequence word, so a reader polls all of its block's lines at once and
// their misses overlap (docs/shm.md, "Line mode": why, measurements).
// Internal to core/shm.
//
// Line i of an area holds a sequence word, then stream bytes [i * kPayload,
// (i + 1) * kPayload). The writer stores a line's payload, then its word
// (release); a reader that sees the word reach its target (acquire) may read
// that line's payload. An area only ever holds sequence words there, so a
// stale word is an older sequence number, never user data.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mlxa2a::shm::lines {

constexpr std::size_t kBytes = 64;  // one cache line on x86 and on most Arm cores
constexpr std::size_t kPayload = kBytes - sizeof(std::uint64_t);

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

inline std::atomic<std::uint64_t>& seq(char* area, std::size_t line) noexcept {
  return *reinterpret_cast<std::atomic<std::uint64_t>*>(area + line * kBytes);
}
inline const std::atomic<std::uint64_t>& seq(const char* area, std::size_t line) noexcept {
  return *reinterpret_cast<const std::atomic<std::uint64_t>*>(area + line * kBytes);
}

constexpr std::size_t count(std::size_t bytes) noexcept { return (bytes + kPayload - 1) / kPayload; }

// Copies n <= 64 bytes inline (payloads are at most 56: no libc call through
// the PLT): two possibly overlapping copies of the largest power of two <= n,
// each loaded before anything is stored.
template <std::size_t W>
inline void copy_ends(char* dst, const char* src, std::size_t n) noexcept {
  char head[W], tail[W];
  __builtin_memcpy(head, src, W);
  __builtin_memcpy(tail, src + n - W, W);
  __builtin_memcpy(dst, head, W);
  __builtin_memcpy(dst + n - W, tail, W);
}
inline void copy_small(char* dst, const char* src, std::size_t n) noexcept {
  if (n >= 32) {
    copy_ends<32>(dst, src, n);
  } else if (n >= 16) {
    copy_ends<16>(dst, src, n);
  } else if (n >= 8) {
    copy_ends<8>(dst, src, n);
  } else if (n >= 4) {
    copy_ends<4>(dst, src, n);
  } else if (n >= 2) {
    copy_ends<2>(dst, src, n);
  } else if (n == 1) {
    *dst = *src;
  }
}
// dst and src do not overlap.
inline void copy(char* dst, const char* src, std::size_t n) noexcept {
  if (n <= 64) {
    copy_small(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
}

// Publishes the stream a[0, a_len) followed by b[0, b_len): each line's
// payload, then its sequence word `s` with release order.
inline void publish(char* area, const char* a, std::size_t a_len, const char* b, std::size_t b_len,
                    std::uint64_t s) noexcept {
  const std::size_t total = a_len + b_len;
  for (std::size_t line = 0, pos = 0; pos < total; ++line, pos += kPayload) {
    char* dst = area + line * kBytes + sizeof(std::uint64_t);
    const std::size_t end = std::min(pos + kPayload, total);
    if (pos < a_len) {
      const std::size_t n = std::min(end, a_len) - pos;
      copy_small(dst, a + pos, n);
      if (end > a_len) copy_small(dst + n, b, end - a_len);
    } else {
      copy_small(dst, b + (pos - a_len), end - pos);
    }
    seq(area, line).store(s, std::memory_order_release);
  }
}

// publish() of one source and read() of a whole stream, for two ranks
// (run_line_pair): no join of two sources, no start inside a line.
inline void publish_one(char* area, const char* src, std::size_t len, std::uint64_t s) noexcept {
  if (len <= kPayload) {  // the common case, without the loop's bookkeeping
    copy_small(area + sizeof(std::uint64_t), src, len);
    seq(area, 0).store(s, std::memory_order_release);
    return;
  }
  for (std::size_t pos = 0; pos < len; pos += kPayload, area += kBytes) {
    copy_small(area + sizeof(std::uint64_t), src + pos, std::min(kPayload, len - pos));
    seq(area, 0).store(s, std::memory_order_release);
  }
}
inline void read_all(const char* area, std::size_t len, char* dst) noexcept {
  if (len <= kPayload) {
    copy_small(dst, area + sizeof(std::uint64_t), len);
    return;
  }
  for (std::size_t pos = 0; pos < len; pos += kPayload, area += kBytes) {
    copy_small(dst + pos, area + sizeof(std::uint64_t), std::min(kPayload, len - pos));
  }
}

// Lines [first, last] all show a sequence number >= target. Every line is
// loaded in every pass (independent relaxed loads: their misses overlap);
// the acquire fence after a successful pass orders the payload reads.
inline bool ready(const char* area, std::size_t first, std::size_t last,
                  std::uint64_t target) noexcept {
  std::uint64_t lowest = UINT64_MAX;
  for (std::size_t line = first; line <= last; ++line) {
    lowest = std::min(lowest, seq(area, line).load(std::memory_order_relaxed));
  }
  if (lowest < target) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

// NodeAlltoall's words carry the writer's bytes per peer (at most 256 in
// line mode) in the low kTagBits: a reader of another size notices at once.
constexpr unsigned kTagBits = 16;
constexpr std::uint64_t word(std::uint64_t seq, std::size_t bytes) noexcept {
  return seq << kTagBits | static_cast<std::uint64_t>(bytes);
}

enum class Check { pending, ready, mismatch };

// As ready(): all lines hold exactly `w` (ready, fenced), all hold w's
// sequence number or later but not all w (mismatch: a writer of another
// size), or not yet.
inline Check check(const char* area, std::size_t first, std::size_t last,
                   std::uint64_t w) noexcept {
  std::uint64_t lowest = UINT64_MAX, highest = 0;
  for (std::size_t line = first; line <= last; ++line) {
    const std::uint64_t v = seq(area, line).load(std::memory_order_relaxed);
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
  }
  if (lowest == w && highest == w) {
    std::atomic_thread_fence(std::memory_order_acquire);
    return Check::ready;
  }
  constexpr std::uint64_t kSeqMask = ~((std::uint64_t{1} << kTagBits) - 1);
  return lowest >= (w & kSeqMask) ? Check::mismatch : Check::pending;
}

// Copies stream bytes [off, off + len) out of the area's payloads. The lines
// holding them must have been found ready().
inline void read(const char* area, std::size_t off, std::size_t len, char* dst) noexcept {
  std::size_t line = off / kPayload;
  std::size_t in_line = off - line * kPayload;
  while (len != 0) {
    const std::size_t n = std::min(len, kPayload - in_line);
    copy_small(dst, area + line * kBytes + sizeof(std::uint64_t) + in_line, n);
    dst += n;
    len -= n;
    ++line;
    in_line = 0;
  }
}

}  // namespace mlxa2a::shm::lines
