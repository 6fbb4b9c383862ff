// The order of blocks in a staging section's rows (core/hier/rows.h): every
// row's slots are a permutation of the row, rotated by the source's index
// from 64-byte chunks only, and the runs fan-in and fan-out copy cover a row
// and a column exactly once, at the slots block_slot() names.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "core/hier/rows.h"

namespace mlxa2a::hier {
namespace {

constexpr std::size_t kChunks[] = {1, 12, 32, 63, 64, 65, 128, 4096};

TEST(Rows, RotatedFrom64ByteChunksOnly) {
  EXPECT_FALSE(rows_rotated(63, 32));
  EXPECT_TRUE(rows_rotated(64, 32));
  EXPECT_TRUE(rows_rotated(65, 2));
  EXPECT_FALSE(rows_rotated(4096, 1));  // one block per row: nothing to rotate
  // Below the gate the layout is destination order, as it always was.
  EXPECT_EQ(block_slot(5, 3, 8, 63), 5u * 8 + 3);
  // From it, row a starts with destination row - a % row.
  EXPECT_EQ(block_slot(5, 3, 8, 64), 5u * 8 + 0);
  EXPECT_EQ(block_slot(5, 0, 8, 64), 5u * 8 + 5);
  EXPECT_EQ(block_slot(9, 0, 8, 128), 9u * 8 + 1);
}

TEST(Rows, EveryRowIsAPermutationOfItsSlots) {
  for (std::size_t chunk : kChunks) {
    for (std::size_t row = 1; row <= 9; ++row) {
      for (std::size_t a = 0; a < 2 * row + 3; ++a) {
        std::vector<int> seen(row, 0);
        for (std::size_t b = 0; b < row; ++b) {
          const std::size_t slot = block_slot(a, b, row, chunk);
          ASSERT_GE(slot, a * row);
          ASSERT_LT(slot, (a + 1) * row);
          ++seen[slot - a * row];
          if (chunk < kRotateFromChunk) {
            EXPECT_EQ(slot, a * row + b);
          }
        }
        for (int s : seen) EXPECT_EQ(s, 1) << "chunk " << chunk << " row " << row << " a " << a;
      }
    }
  }
}

TEST(Rows, RowRunsCoverTheRowInSlotOrder) {
  for (std::size_t chunk : kChunks) {
    for (std::size_t row = 1; row <= 9; ++row) {
      for (std::size_t a = 0; a < 2 * row + 3; ++a) {
        std::vector<int> seen(row, 0);
        std::size_t next_slot = a * row;  // the runs follow each other in the section
        int runs = 0;
        row_runs(a, row, chunk, [&](const BlockRun& run) {
          ++runs;
          EXPECT_GE(run.count, 1u);
          EXPECT_EQ(run.step, 1u);
          EXPECT_EQ(run.slot, next_slot);
          for (std::size_t i = 0; i < run.count; ++i) {
            const std::size_t b = run.first + i;
            ASSERT_LT(b, row);
            ++seen[b];
            EXPECT_EQ(run.slot + i, block_slot(a, b, row, chunk));
          }
          next_slot += run.count;
        });
        EXPECT_EQ(next_slot, (a + 1) * row);
        EXPECT_LE(runs, rows_rotated(chunk, row) ? 2 : 1);
        for (int s : seen) EXPECT_EQ(s, 1) << "chunk " << chunk << " row " << row << " a " << a;
      }
    }
  }
}

TEST(Rows, ColumnRunsCoverTheColumnAtItsSlots) {
  for (std::size_t chunk : kChunks) {
    for (std::size_t row = 1; row <= 9; ++row) {
      // Sections with fewer, as many and more rows than a row's blocks
      // (irregular nodes: the sending node is smaller or larger).
      for (std::size_t rows : {std::size_t{1}, row, 3 * row + 2}) {
        for (std::size_t b = 0; b < row; ++b) {
          std::size_t next = 0;  // sources in order, each once
          int runs = 0;
          column_runs(b, rows, row, chunk, [&](const BlockRun& run) {
            ++runs;
            EXPECT_EQ(run.first, next);
            EXPECT_GE(run.count, 1u);
            EXPECT_EQ(run.step, rows_rotated(chunk, row) ? row + 1 : row);
            for (std::size_t i = 0; i < run.count; ++i) {
              EXPECT_EQ(run.slot + i * run.step, block_slot(run.first + i, b, row, chunk))
                  << "chunk " << chunk << " row " << row << " rows " << rows << " b " << b;
            }
            next += run.count;
          });
          EXPECT_EQ(next, rows);
          if (rows == row) {
            EXPECT_LE(runs, rows_rotated(chunk, row) ? 2 : 1);
          }
        }
      }
    }
  }
}

// runs_without() leaves out exactly one member of a row or a column (the
// rank's own block) and keeps every other at block_slot()'s slot.
TEST(Rows, RunsWithoutLeaveOutOneMemberAtItsSlot) {
  for (std::size_t chunk : {std::size_t{12}, std::size_t{4096}}) {
    for (std::size_t row = 1; row <= 7; ++row) {
      for (std::size_t a = 0; a < row; ++a) {
        for (std::size_t skip = 0; skip < row; ++skip) {
          std::vector<int> seen(row, 0);
          auto check = [&](const BlockRun& run) {
            EXPECT_GE(run.count, 1u);
            for (std::size_t i = 0; i < run.count; ++i) {
              ++seen[run.first + i];
              EXPECT_EQ(run.slot + i * run.step, block_slot(a, run.first + i, row, chunk));
            }
          };
          row_runs(a, row, chunk, [&](const BlockRun& run) { runs_without(run, skip, check); });
          for (std::size_t b = 0; b < row; ++b) EXPECT_EQ(seen[b], b == skip ? 0 : 1) << b;
          // Column a of `row` rows without source `skip`.
          std::vector<int> sources(row, 0);
          column_runs(a, row, row, chunk, [&](const BlockRun& run) {
            runs_without(run, skip, [&](const BlockRun& part) {
              for (std::size_t i = 0; i < part.count; ++i) {
                ++sources[part.first + i];
                EXPECT_EQ(part.slot + i * part.step, block_slot(part.first + i, a, row, chunk));
              }
            });
          });
          for (std::size_t s2 = 0; s2 < row; ++s2) EXPECT_EQ(sources[s2], s2 == skip ? 0 : 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlxa2a::hier
