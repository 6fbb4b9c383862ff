#include "core/mpi/mpit_index.h"

#include <gtest/gtest.h>

namespace mlxa2a::core::mpi {
namespace {

TEST(MpitIndexSpace, OursFollowTheMpisOwnAtFirstCount) {
  MpitIndexSpace s(3);
  EXPECT_EQ(s.count(10), 13);
  for (int j = 0; j < 10; ++j) {
    const auto w = s.locate(j, 10);
    EXPECT_FALSE(w.ours);
    EXPECT_EQ(w.index, j);
    EXPECT_EQ(s.view_of_mpi(j, 10), j);
  }
  for (int i = 0; i < 3; ++i) {
    const auto w = s.locate(10 + i, 10);
    EXPECT_TRUE(w.ours);
    EXPECT_EQ(w.index, i);
    EXPECT_EQ(s.view_of_ours(i, 10), 10 + i);
  }
  EXPECT_EQ(s.locate(13, 10).index, -1);
  EXPECT_EQ(s.locate(-1, 10).index, -1);
}

TEST(MpitIndexSpace, VariablesTheMpiAddsLaterGoPastOursAndNothingMoves) {
  MpitIndexSpace s(2);
  ASSERT_EQ(s.count(5), 7);
  // The MPI grows to 8 variables (e.g. a component loaded at MPI_Init).
  EXPECT_EQ(s.count(8), 10);
  EXPECT_EQ(s.locate(4, 8).index, 4);
  EXPECT_TRUE(s.locate(5, 8).ours);
  EXPECT_EQ(s.locate(6, 8).index, 1);
  const auto later = s.locate(7, 8);
  EXPECT_FALSE(later.ours);
  EXPECT_EQ(later.index, 5);
  EXPECT_EQ(s.view_of_mpi(5, 8), 7);
  EXPECT_EQ(s.view_of_mpi(7, 8), 9);
  EXPECT_EQ(s.locate(9, 8).index, 7);
  EXPECT_EQ(s.locate(10, 8).index, -1);
  EXPECT_EQ(s.view_of_ours(0, 8), 5);  // ours kept their indices
}

TEST(MpitIndexSpace, AnMpiWithoutVariablesStillListsOurs) {
  MpitIndexSpace s(4);
  EXPECT_EQ(s.count(0), 4);
  EXPECT_TRUE(s.locate(0, 0).ours);
  EXPECT_EQ(s.locate(3, 0).index, 3);
}

}  // namespace
}  // namespace mlxa2a::core::mpi
