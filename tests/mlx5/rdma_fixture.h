// Shared by the forked RDMA tests (test_rdma.cc, test_zcopy_hier.cc): a rank's
// hierarchical engine over a real RdmaLeaderTransport on fakeverbs, the
// leaders' group numbering and the options that keep failures quick.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/mlx5/options.h"
#include "core/status.h"
#include "tests/mlx5/fork_group.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::test {

inline constexpr std::size_t kStagePerRank = 4096;  // small: larger sizes run in rounds

// The leaders' group: leader j of node m is member first_rank[m] + j.
int leader_group_rank(const hier::NodeMap& map, const hier::Plan& plan,
                      std::vector<int>* first_rank);
int leader_count(const hier::NodeMap& map);
mlx5::NetOptions test_options();

// Builds this rank's stage and, on leaders, its RDMA transport (collective
// over the leaders' wiring). 0 on success; 42 when the transport was refused
// as want_transport says; 1 (after a message) otherwise. *gather_sge: on a
// leader, its transport's SGEs per WR; *why: on a leader, why the set-up
// failed ("" if it did not).
int build_rdma_hier(shm::test::ForkBootstrap& boot, int rank, const std::vector<int>& node_of,
                    const std::vector<int>& leads, const mlx5::NetOptions& opt,
                    const ForkGroupWiring& wiring, std::unique_ptr<hier::HierAlltoall>* engine,
                    Status want_transport, int* qps_created, unsigned* gather_sge = nullptr,
                    std::string* why = nullptr);

}  // namespace mlxa2a::test
