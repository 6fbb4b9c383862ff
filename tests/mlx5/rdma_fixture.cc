#include "tests/mlx5/rdma_fixture.h"

#include <cstdio>
#include <string>

#include "core/mlx5/rdma_transport.h"

namespace mlxa2a::test {

int leader_group_rank(const hier::NodeMap& map, const hier::Plan& plan,
                      std::vector<int>* first_rank) {
  int at = 0;
  for (int m = 0; m < map.nodes(); ++m) {
    first_rank->push_back(at);
    at += map.leader_count(m);
  }
  return (*first_rank)[static_cast<std::size_t>(plan.node())] + plan.leader_index();
}

int leader_count(const hier::NodeMap& map) {
  int n = 0;
  for (int m = 0; m < map.nodes(); ++m) n += map.leader_count(m);
  return n;
}

mlx5::NetOptions test_options() {
  mlx5::NetOptions opt;
  opt.timeout_ms = 1500;
  opt.qp_timeout = 8;  // 1 ms per retry: a dead peer is reported in ~10 ms
  opt.retry_count = 3;
  opt.oversubscribed = true;  // more processes than cores
  return opt;
}

// Builds this rank's stage and, on leaders, its RDMA transport.
int build_rdma_hier(shm::test::ForkBootstrap& boot, int rank, const std::vector<int>& node_of,
                    const std::vector<int>& leads, const mlx5::NetOptions& opt,
                    const ForkGroupWiring& wiring, std::unique_ptr<hier::HierAlltoall>* engine,
                    Status want_transport, int* qps_created, unsigned* gather_sge,
                    std::string* why_out) {
  using hier::HierAlltoall;
  const int n = static_cast<int>(node_of.size());
  const hier::NodeMap map(node_of, leads);
  const hier::Plan plan(map, rank, kStagePerRank);
  shm::Options sopt;
  sopt.oversubscribed = true;
  sopt.timeout_ms = 20000;
  const std::size_t area = HierAlltoall::area_bytes(n, boot.local_size(), kStagePerRank);
  std::unique_ptr<shm::NodeStage> stage;
  FT_CHECK_STATUS(shm::NodeStage::create(boot, sopt, area, area, stage), Status::ok);
  std::unique_ptr<mlx5::RdmaLeaderTransport> rdma;
  if (plan.leader()) {
    std::vector<int> first_rank;
    const int me = leader_group_rank(map, plan, &first_rank);
    std::vector<int> peers;
    for (int m = 0; m < map.nodes(); ++m) {
      if (m != plan.node() && plan.handled_by(m) == plan.leader_index()) {
        peers.push_back(first_rank[static_cast<std::size_t>(m)] + plan.partner(m));
      }
    }
    ForkGroup group(wiring, me);
    std::string why;
    const Status st = mlx5::RdmaLeaderTransport::create(group, HierAlltoall::areas_of(*stage),
                                                  first_rank, peers, opt, &rdma, &why);
    if (why_out) *why_out = why;
    if (st != want_transport) {
      std::fprintf(stderr, "rank %d: transport: %s (%s)\n", rank, to_string(st), why.c_str());
      return 1;
    }
    if (st != Status::ok) return 42;  // refused as expected
    *qps_created += rdma->qps_created();
    if (gather_sge) *gather_sge = rdma->gather_sge();
  } else if (want_transport != Status::ok) {
    return 42;
  }
  FT_CHECK_STATUS(HierAlltoall::create(node_of, leads, rank, kStagePerRank, std::move(stage),
                                       std::move(rdma), *engine),
                  Status::ok);
  return 0;
}

}  // namespace mlxa2a::test
