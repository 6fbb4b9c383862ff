// Block order inside a staging section: one row per source, `row` blocks of
// `chunk` bytes. Rows are rotated from kRotateFromChunk so that a column does
// not step by 4 KiB (L1 aliasing); why, and why not below: docs/hier.md
// "Rotated rows".
//
// Contract: pure arithmetic. Depends only on the chunk (equal on every rank
// for a round) and the section's shape, so writer, sending leader and remote
// readers agree. Everything placing or finding a block goes through here
// (hier_alltoall.cc, core/mlx5/gather.cc, bench/model_bench.cc).
#pragma once

#include <algorithm>
#include <cstddef>

namespace mlxa2a::hier {

inline constexpr std::size_t kRotateFromChunk = 64;

constexpr bool rows_rotated(std::size_t chunk, std::size_t row) noexcept {
  return chunk >= kRotateFromChunk && row > 1;
}

// In blocks from the section's start; a: source, b < row: destination.
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

// Row a in slot order: one run, or two when rotated (r = a % row: row - r ..
// row - 1, then 0 .. row - r - 1). Always inlined, as should be f, so the
// unrotated case is a single copy (left to GCC: fan-out 12 B 20-40% slower).
template <typename F>
[[gnu::always_inline]] constexpr void row_runs(std::size_t a, std::size_t row, std::size_t chunk,
                                               F&& f) {
  const std::size_t r = rows_rotated(chunk, row) ? a % row : 0;
  if (r != 0) f(BlockRun{row - r, r, a * row, 1});
  f(BlockRun{0, row - r, a * row + r, 1});
}

// Column b of `rows` rows. Rotated, [s][b] is at s * (row + 1) + b - q * row
// with q = (s + b) / row: one run per q (two when rows == row).
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

// `run` without member `skip` (the own block): f on the non-empty parts.
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
