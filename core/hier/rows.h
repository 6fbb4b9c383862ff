// The order of the blocks inside a staging section's rows (docs/hier.md,
// Layout): which slot holds block [a][b], and the runs in which fan-in
// writes a row and fan-out reads a column.
//
// A section holds one row per source, `row` blocks of `chunk` bytes each (one
// per destination member). Fan-in writes a row, fan-out reads a column: one
// block per row, `row` blocks apart. At 128 bytes and 32 members that stride
// is 4 KiB, so every block of a column maps to the same L1 sets (4 KiB
// aliasing) and fan-out ran at a third of memcpy's bandwidth
// (bench/model_bench). From kRotateFromChunk bytes per block each row is
// rotated by its source's index - block [a][b] at slot a * row + (a + b) % row
// - so a column steps by row + 1 blocks instead. Below that the blocks are in
// destination order, as before: there the copies are bound by per-block
// instructions, not by cache sets, and rotating measured mixed (docs/hier.md).
//
// Contract: pure arithmetic, no state. The choice depends only on the chunk
// (equal on every rank of a team for a round: it derives from the call's
// byte count) and the section's shape, so the writer of a section, the
// leader that sends it and the ranks that read it on the partner node all
// compute the same layout. Everything that places or finds a block in a
// section goes through these functions (core/hier/hier_alltoall.cc,
// core/mlx5/gather.cc, bench/model_bench.cc).
#pragma once

#include <algorithm>
#include <cstddef>

namespace mlxa2a::hier {

inline constexpr std::size_t kRotateFromChunk = 64;

// Whether rows of `row` blocks of `chunk` bytes are rotated (a row of one
// block has nothing to rotate).
constexpr bool rows_rotated(std::size_t chunk, std::size_t row) noexcept {
  return chunk >= kRotateFromChunk && row > 1;
}

// The slot (in blocks from the section's start) of block [a][b]: source a,
// destination b < row.
constexpr std::size_t block_slot(std::size_t a, std::size_t b, std::size_t row,
                                 std::size_t chunk) noexcept {
  return a * row + (rows_rotated(chunk, row) ? (a + b) % row : b);
}

// Blocks first .. first + count - 1 of a row (destinations) or of a column
// (sources), the first at `slot`, each next one `step` slots further.
struct BlockRun {
  std::size_t first;
  std::size_t count;
  std::size_t slot;
  std::size_t step;
};

// Row a in slot order (as the bytes of the section follow each other): one
// contiguous run, or two when rotated - destinations row - r .. row - 1 at
// the row's start, then 0 .. row - r - 1 (r = a % row). f(BlockRun) per run.
// Always inlined, as should be f: then the unrotated case compiles to the
// single copy it always was (inlining left to GCC made fan-out 12 B 20-40%
// slower in bench/model_bench).
template <typename F>
[[gnu::always_inline]] constexpr void row_runs(std::size_t a, std::size_t row, std::size_t chunk,
                                               F&& f) {
  const std::size_t r = rows_rotated(chunk, row) ? a % row : 0;
  if (r != 0) f(BlockRun{row - r, r, a * row, 1});
  f(BlockRun{0, row - r, a * row + r, 1});
}

// Column b (b < row) of `rows` rows in source order. Rotated, block [s][b] is
// at s * (row + 1) + b - q * row with q = (s + b) / row: one run of step
// row + 1 per value of q, that is two when rows == row. f(BlockRun) per run.
template <typename F>
[[gnu::always_inline]] constexpr void column_runs(std::size_t b, std::size_t rows, std::size_t row,
                                                  std::size_t chunk, F&& f) {
  if (!rows_rotated(chunk, row)) {
    f(BlockRun{0, rows, b, row});
    return;
  }
  for (std::size_t s = 0, q = 0; s < rows; ++q) {
    const std::size_t end = std::min(rows, (q + 1) * row - b);
    f(BlockRun{s, end - s, s * (row + 1) + b - q * row, row + 1});
    s = end;
  }
}

// `run` without member `skip` (a row's destination or a column's source):
// f(BlockRun) on the parts before and after it, none empty (the rank's own
// block, which it copies straight from its send to its receive buffer,
// hier_alltoall.cc own_block_direct).
template <typename F>
[[gnu::always_inline]] constexpr void runs_without(const BlockRun& run, std::size_t skip, F&& f) {
  if (skip < run.first || skip - run.first >= run.count) {
    f(run);
    return;
  }
  const std::size_t before = skip - run.first;
  if (before != 0) f(BlockRun{run.first, before, run.slot, run.step});
  const std::size_t after = run.count - before - 1;
  if (after != 0) f(BlockRun{skip + 1, after, run.slot + (before + 1) * run.step, run.step});
}

}  // namespace mlxa2a::hier
