// MLXA2A_DEBUG_NODE_SIZE: parsing and the virtual node of each rank.
#include "core/config/leaders.h"
#include "core/config/node_layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace mlxa2a::core::config {
namespace {

std::vector<int> nodes(const char* text, int size) {
  const auto l = NodeLayout::parse(text);
  EXPECT_TRUE(l) << text;
  std::vector<int> v;
  for (int r = 0; r < size; ++r) v.push_back(l ? l->node_of(r, size) : -1);
  return v;
}

TEST(NodeLayout, RealNodesByDefault) {
  const auto l = NodeLayout::parse("0");
  ASSERT_TRUE(l);
  EXPECT_FALSE(l->virtual_nodes());
  EXPECT_EQ(nodes("0", 3), (std::vector<int>{0, 0, 0}));
}

TEST(NodeLayout, Blocks) {
  EXPECT_EQ(nodes("1", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(nodes("2", 5), (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(nodes(" 3 ", 7), (std::vector<int>{0, 0, 0, 1, 1, 1, 2}));
}

TEST(NodeLayout, RoundRobin) {
  // 2 per node over ceil(5/2) = 3 nodes.
  EXPECT_EQ(nodes("rr:2", 5), (std::vector<int>{0, 1, 2, 0, 1}));
  EXPECT_EQ(nodes("rr:4", 4), (std::vector<int>{0, 0, 0, 0}));
}

TEST(NodeLayout, IrregularRepeats) {
  EXPECT_EQ(nodes("3,1,2", 8), (std::vector<int>{0, 0, 0, 1, 2, 2, 3, 3}));
  EXPECT_EQ(nodes("1,2", 6), (std::vector<int>{0, 1, 1, 2, 3, 3}));
}

TEST(NodeLayout, FormatRoundTrips) {
  for (const char* t : {"0", "4", "rr:3", "3,1,2"}) {
    const auto l = NodeLayout::parse(t);
    ASSERT_TRUE(l) << t;
    EXPECT_EQ(l->format(), t);
    EXPECT_EQ(NodeLayout::parse(l->format()), l);
  }
}

TEST(NodeLayout, RejectsBadText) {
  for (const char* t : {"", "-1", "x", "rr:", "rr:0", "rr:x", "3,", ",3", "3,0", "1,,2",
                        "2000000", "1.5", "rr:2,3"}) {
    EXPECT_FALSE(NodeLayout::parse(t)) << t;
  }
}

}  // namespace
}  // namespace mlxa2a::core::config

namespace mlxa2a::core::config {
namespace {

TEST(LeaderPolicy, ParsesAndFormats) {
  for (const char* text : {"rails", "node", "numa", "socket", "1", "3", "1024"}) {
    const auto p = LeaderPolicy::parse(text);
    ASSERT_TRUE(p) << text;
    EXPECT_EQ(p->format(), text);
  }
  for (const char* bad : {"", "0", "-1", "1025", "2x", "NUMA", " node"}) {
    EXPECT_FALSE(LeaderPolicy::parse(bad)) << bad;
  }
  EXPECT_TRUE(LeaderPolicy::parse("numa")->needs_domains());
  EXPECT_FALSE(LeaderPolicy::parse("4")->needs_domains());
  EXPECT_EQ(LeaderPolicy{}.format(), "rails");  // the default (issue 39 item 4)
}

// One leader per rail present, the lowest rank on it; local rank 0 always.
TEST(LeaderPolicy, ChoosesOneLeaderPerRail) {
  EXPECT_EQ(choose_rail_leaders(std::vector<int>{0, 0, 1, 1}), (std::vector<int>{0, 2}));
  EXPECT_EQ(choose_rail_leaders(std::vector<int>{-1, -1, -1}), (std::vector<int>{0}));
  // Rank 0's process has rail 1 open (an earlier team): it leads rail 1.
  EXPECT_EQ(choose_rail_leaders(std::vector<int>{1, 0, 1, 0}), (std::vector<int>{0, 1}));
  EXPECT_EQ(choose_rail_leaders(std::vector<int>{0, 1, 2, 3, 3}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(choose_rail_leaders(std::vector<int>{}).empty());
  // Proposals: blocks of ranks per rail, bounded by the ranks; one rail: none.
  EXPECT_EQ(proposed_rail(0, 8, 4), 0);
  EXPECT_EQ(proposed_rail(3, 8, 4), 1);
  EXPECT_EQ(proposed_rail(7, 8, 4), 3);
  EXPECT_EQ(proposed_rail(1, 2, 4), 2);  // 2 ranks, 4 rails: rails 0 and 2
  EXPECT_EQ(proposed_rail(0, 8, 1), -1);
}

TEST(LeaderPolicy, ChoosesLeaders) {
  const std::vector<int> none(6, -1);
  EXPECT_EQ(choose_leaders(*LeaderPolicy::parse("node"), none), (std::vector<int>{0}));
  EXPECT_EQ(choose_leaders(*LeaderPolicy::parse("2"), none), (std::vector<int>{0, 3}));
  EXPECT_EQ(choose_leaders(*LeaderPolicy::parse("4"), none), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(choose_leaders(*LeaderPolicy::parse("9"), none),
            (std::vector<int>{0, 1, 2, 3, 4, 5}));  // at most one per rank
  // One per domain: its first rank; unbound ranks (-1) count as one domain.
  const std::vector<int> domains = {1, 1, 0, -1, 0, 1};
  EXPECT_EQ(choose_leaders(*LeaderPolicy::parse("numa"), domains), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(choose_leaders(*LeaderPolicy::parse("socket"), none), (std::vector<int>{0}));
  EXPECT_TRUE(choose_leaders(*LeaderPolicy::parse("node"), std::vector<int>{}).empty());
}

}  // namespace
}  // namespace mlxa2a::core::config
