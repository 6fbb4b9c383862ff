// Segment layouts shared by all ranks of a node (internal to core/shm; the
// picture: docs/shm.md, "Segment"). Every segment (NodeSegment) starts with
// SegmentHeader and RankInfo[local_size]; the page-aligned user area after
// them is NodeAlltoall's (AlltoallGeometry below) or NodeStage's.
//
// Everything one rank writes and others poll sits in its own kLine-aligned
// block, so a store invalidates only that block's readers. kLine is two
// 64-byte lines: x86's adjacent-line prefetcher moves lines in pairs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mlxa2a::shm::layout {

constexpr std::size_t kLine = 128;
constexpr std::uint64_t kMagic = 0x6d6c786132617368ULL;  // "mlxa2ash"
constexpr std::uint32_t kVersion = 5;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process atomics must be lock-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "cross-process atomics must be lock-free");

// Written by the creator before the segment's name is broadcast; read-only
// afterwards except `attached` and `failed`.
struct alignas(kLine) SegmentHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t local_size;
  std::atomic<std::uint32_t> attached;  // ranks that mapped the segment
  std::atomic<std::uint32_t> failed;    // set by any rank whose collective failed
};

// Written by its rank during setup; read by others after the setup barrier.
struct alignas(kLine) RankInfo {
  std::int32_t pid;
  std::atomic<std::uint32_t> cma_ok;  // 1: this rank could process_vm_readv every peer
  std::uint64_t probe_addr;      // address of probe_value in this rank's memory
  std::uint64_t probe_value;
  std::uint64_t pid_ns;          // inode of /proc/self/ns/pid, 0 if unknown
};

struct alignas(kLine) DoneFlag {
  std::atomic<std::uint64_t> seq;  // last call whose peers' send buffers we finished reading
};

// Which call a rank is in, with how many bytes per peer (docs/shm.md, "Sizes
// that differ across ranks"): stored (release) at the start of every run(),
// read by a peer only while it waits long. One word, so a reader never pairs
// one call's number with the next call's size: (call mod 2^32) << 32 | size
// folded to 32 bits. Peers are at most one call apart, so 32 bits of call
// tell them apart; sizes with equal folds are not told apart.
struct alignas(kLine) CallInfo {
  std::atomic<std::uint64_t> word;
};
constexpr std::uint32_t fold_bytes(std::uint64_t bytes) noexcept {
  return static_cast<std::uint32_t>(bytes ^ (bytes >> 32));
}
constexpr std::uint64_t call_word(std::uint64_t call, std::uint64_t bytes) noexcept {
  return (call << 32) | fold_bytes(bytes);
}

// A slot: seq (the call/round whose data it holds), the writer's bytes per
// peer (a reader of another size fails the call rather than read a wrong
// block), then data, so up to kLine-16 bytes travel in the flag's line.
constexpr std::size_t kSlotBytesOffset = sizeof(std::uint64_t);
constexpr std::size_t kSlotDataOffset = 2 * sizeof(std::uint64_t);

constexpr std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// Overflow-checked size arithmetic: sizes come from switches and rank counts,
// and a wrapped product would map a small segment and write far past it. An
// overflow anywhere poisons the result (value() 0): set-up fails cleanly.
class Size {
 public:
  constexpr Size(std::size_t v = 0) noexcept : v_(v) {}  // NOLINT: implicit on purpose
  constexpr bool ok() const noexcept { return ok_; }
  // The value, or 0 after an overflow (0 is never a valid segment size).
  constexpr std::size_t value() const noexcept { return ok_ ? v_ : 0; }
  friend constexpr Size operator+(Size a, Size b) noexcept {
    Size r;
    r.ok_ = a.ok_ && b.ok_ && !__builtin_add_overflow(a.v_, b.v_, &r.v_);
    return r;
  }
  friend constexpr Size operator*(Size a, Size b) noexcept {
    Size r;
    r.ok_ = a.ok_ && b.ok_ && !__builtin_mul_overflow(a.v_, b.v_, &r.v_);
    return r;
  }
  // Rounds up to a multiple of a (a > 0).
  constexpr Size round_up(std::size_t a) const noexcept {
    Size r = *this + Size(a - 1);
    if (r.ok_) r.v_ = r.v_ / a * a;
    return r;
  }

 private:
  std::size_t v_ = 0;
  bool ok_ = true;
};

// One line-mode area per rank and parity: 64 lines, 3584 stream bytes.
constexpr std::size_t kLineAreaBytes = 4096;

// NodeAlltoall's user area. total == 0: the sizes do not fit in memory.
struct AlltoallGeometry {
  std::size_t done_offset;
  std::size_t calls_offset;
  std::size_t lines_offset;
  std::size_t slots_offset;
  std::size_t slot_stride;
  std::size_t total;
};

constexpr AlltoallGeometry alltoall_geometry(std::size_t local_size, std::size_t slot_capacity) {
  const Size n(local_size);
  const Size calls = n * sizeof(DoneFlag);
  const Size lines = (calls + n * sizeof(CallInfo)).round_up(4096);
  const Size slots = lines + Size(2) * n * kLineAreaBytes;
  const Size stride = (Size(kSlotDataOffset) + slot_capacity).round_up(kLine);
  const Size total = slots + Size(2) * n * stride;
  AlltoallGeometry g{};
  if (!total.ok()) return g;
  g.done_offset = 0;
  g.calls_offset = calls.value();
  g.lines_offset = lines.value();
  g.slots_offset = slots.value();
  g.slot_stride = stride.value();
  g.total = total.value();
  return g;
}

}  // namespace mlxa2a::shm::layout
