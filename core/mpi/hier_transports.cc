// HierEngine's transports (the set-up steps after the stage): RDMA among the
// leaders (RC, or DC over the QP budget), tried again while another team's
// set-up holds a pair it needs; then zero-copy over each node; and the
// team's agreement on both.
#include <chrono>
#include <random>
#include <thread>

#include "core/log.h"
#include "core/mpi/group_bootstrap.h"
#include "core/mpi/hier_engine.h"
#include "core/mpi/hier_setup.h"
#include "core/mpi/topology.h"
#if MLXA2A_HAVE_VERBS
#include "core/mlx5/dc_transport.h"
#include "core/mlx5/rdma_transport.h"
#include "core/mlx5/zcopy_sender.h"
#include "core/mpi/stacking.h"
#endif

namespace mlxa2a::core::mpi {

namespace {

// Why zero-copy cannot run: the first node with several leaders
// (MLXA2A_LEADERS), or "" when every node has one.
std::string several_leaders(const hier::NodeMap& map) {
  for (int m = 0; m < map.nodes(); ++m) {
    if (map.leader_count(m) != 1) {
      return "node " + std::to_string(m) + " has " + std::to_string(map.leader_count(m)) +
             " leaders (MLXA2A_LEADERS): zero-copy needs one per node";
    }
  }
  return "";
}

}  // namespace

// try_rdma() until it works, fails for good, or kAttempts have passed: a
// set-up that met another team's (another thread's) on a pooled queue pair
// fails as contended on both teams, touching nothing of the other's; tried
// again once that one is done, it finds the pair connected and uses it.
// Every leader reports its outcome (ok < contended < failed) and a random
// pause; all take the largest, so they try again together, and teams that
// collided wait different times. Collective over the leaders.
Status HierEngine::rdma_attempts(Setup& s) {
  constexpr int kAttempts = 8;
  std::minstd_rand pick(static_cast<unsigned>(pool_proposal()));
  for (int attempt = 1;; ++attempt) {
    const Status st = try_rdma(s.leaders.get(), *s.map, s.rank, s.req.oversubscribed,
                               s.stage.get(), s.first_rank, &s.rdma);
    const int mine[2] = {st == Status::ok ? 0 : st == Status::contended ? 1 : 2,
                         static_cast<int>(1 + pick() % (1u << std::min(attempt, 6)))};
    int all[2] = {2, 0};
    if (PMPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, s.leaders.get()) != MPI_SUCCESS) {
      all[0] = 2;
    }
    if (all[0] != 1 || attempt == kAttempts) return st;
    // Contended somewhere, failed nowhere: every leader drops what it made.
    MLXA2A_LOG(Debug, "RDMA set-up met another team's (%s); attempt %d of %d in %d ms",
               rdma_why_.c_str(), attempt + 1, kAttempts, all[1]);
    s.rdma.reset();
    rdma_why_.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(all[1]));
  }
}

// The RDMA transport: tried by every leader whatever failed before (its
// set-up is collective over the leaders); then zero-copy (docs/zerocopy.md):
// switch not 0 and one leader on every node. Every rank knows every node's
// leaders, so all refuse alike without setting up shared PDs a node with
// several leaders would make useless (a rank would need a registration on
// each of its leaders' PDs).
void HierEngine::try_transports(Setup& s) {
  if (!s.map) return;
  const hier::NodeMap& map = *s.map;
  // Not attempted (agreed alike by every leader, so none is left in the
  // transport's collectives): rdma_why_ says why where it is known.
  if (s.lead && s.attempt_rdma && s.leaders.get() != MPI_COMM_NULL) {
    s.rdma_failed = rdma_attempts(s) == Status::ok ? 0 : 1;
  } else if (!s.lead) {
    s.rdma_failed = 0;  // only leaders have a say
  }
  zcopy_why_ = "MLXA2A_NET_ZCOPY_THRESHOLD is 0";
  if (settings_.net.zcopy_threshold == 0) return;
  zcopy_why_ = several_leaders(map);
  if (!zcopy_why_.empty()) return;
  const int node = map.node_of(s.rank);
  s.zcopy_failed =
      try_zcopy(s.req.node_comm, map, s.rank, map.leaders(node)[0],
                s.lead && s.rdma_failed == 0 && !dc_)
          ? 0
          : 1;
  if (s.zcopy_failed && dc_) zcopy_why_ = "the DC transport stages every message";
}

// The agreement on the transports, with every failure so far: all ranks pick
// the same transport (RDMA where every leader has it) and zero-copy alike.
SetupOutcome HierEngine::agree_transports(Setup& s, const SetupOutcome& here) {
  int flags[3] = {here.ok() ? 0 : 1, s.rdma_failed, s.zcopy_failed}, any[3] = {1, 1, 1};
  const bool reduced =
      PMPI_Allreduce(flags, any, 3, MPI_INT, MPI_MAX, s.req.comm) == MPI_SUCCESS;
  rdma_ = !any[1];
  if (any[1] && rdma_why_.empty()) rdma_why_ = "RDMA unavailable on another leader";
  zcopy_on_ = rdma_ && !any[2];
  if (zcopy_on_) {
    zcopy_why_.clear();
  } else {
    zcopy_.reset();
    if (!rdma_) zcopy_why_ = "no RDMA";
    else if (!flags[2] && zcopy_why_.empty()) zcopy_why_ = "unavailable on another node";
  }
  if (!here.ok()) return here;
  return {reduced && !any[0] ? Status::ok : Status::create_failed, ""};
}

bool HierEngine::rdma_offered() noexcept {
#if MLXA2A_HAVE_VERBS
  try {
    const mlx5::NetOptions opt(settings_.net);
    if (mlx5::EndpointPool::link_layers(opt) != 0) return true;
    // Says why this process has no RDMA (the pool remembers it).
    if (mlx5::EndpointPool::get(opt, &rdma_why_) != nullptr) return true;
  } catch (...) {  // allocation only
    rdma_why_ = "out of memory";
  }
  return false;
#else
  rdma_why_ = "built without verbs headers";
  return false;
#endif
}

#if MLXA2A_HAVE_VERBS
namespace {

// DC instead of RC, when RC would take a leader past its QP budget (every
// leader learns it alike from RC's set-up): collective over the leaders.
bool set_up_dc(GroupBootstrap& boot, const hier::StageAreas& areas,
               const std::vector<int>& first_rank, const std::vector<int>& peers,
               const mlx5::NetOptions& opt, std::unique_ptr<hier::LeaderTransport>* out,
               std::string* why) {
  const std::string rc_why = *why;
  std::unique_ptr<mlx5::DcLeaderTransport> t;
  // Every leader got past create (agreed) before pinging: each DCT is in RTR.
  if (mlx5::DcLeaderTransport::create(boot, areas, first_rank, peers, opt, &t, why) !=
          Status::ok ||
      !t->ping(why)) {
    *why = rc_why + "; DC: " + *why;
    return false;
  }
  MLXA2A_LOG(Info, "RDMA: %s; the leaders use DC (%zu QPs here)", rc_why.c_str(), t->qps());
  *out = std::move(t);
  return true;
}

}  // namespace
#endif

Status HierEngine::try_rdma(MPI_Comm leaders, const hier::NodeMap& map, int rank,
                          bool oversubscribed, const shm::NodeStage* stage,
                          const std::vector<int>& first_rank,
                          std::unique_ptr<hier::LeaderTransport>* out) noexcept {
#if MLXA2A_HAVE_VERBS
  try {
    mlx5::NetOptions opt(settings_.net);
    opt.oversubscribed = oversubscribed;
    // Not the team's communicator: a leader waiting for another node makes
    // no MPI call, yet a local peer may need this rank's MPI progress.
    opt.idle = [] { drive_mpi_progress(MPI_COMM_WORLD); };
    const hier::Plan plan(map, rank, 64);
    opt.leader_slot = plan.leader_index();  // spreads a node's leaders over its HCAs
    if (plan.leader()) opt.rail = map.rail(plan.node(), plan.leader_index());  // or its rail's
    opt.ranks_per_node = map.node_size(plan.node());  // they share the HCA's QPs
    std::vector<int> peers;
    for (int m = 0; m < map.nodes(); ++m) {
      if (m != plan.node() && plan.handled_by(m) == plan.leader_index()) {
        peers.push_back(first_rank[static_cast<std::size_t>(m)] + plan.partner(m));
      }
    }
    hier::StageAreas areas;
    if (stage) areas = hier::HierAlltoall::areas_of(*stage);
    MpiGroupBootstrap boot(leaders);
    std::unique_ptr<mlx5::RdmaLeaderTransport> t;
    bool over_budget = false;
    const Status st = mlx5::RdmaLeaderTransport::create(boot, areas, first_rank, peers, opt, &t,
                                                        &rdma_why_, &over_budget);
    // Over the RC QP budget (every leader alike): DC, collective as well.
    if (st != Status::ok) {
      if (!over_budget) return st;
      if (!set_up_dc(boot, areas, first_rank, peers, opt, out, &rdma_why_)) {
        return Status::unavailable;
      }
      dc_ = true;
      rdma_gather_sge_ = 0;  // DC stages every message: no zero-copy
      mlx5::note_transport(true);
      return Status::ok;
    }
    // Every leader got here (create agreed): pinging is safe, each partner
    // is in RTR. A pair that fails means PMPI leaders for the team.
    if (!t->ping(&rdma_why_)) {
      MLXA2A_LOG(Info, "RDMA: %s", rdma_why_.c_str());
      return Status::unavailable;
    }
    rdma_gather_sge_ = t->gather_sge();
    mlx5::note_transport(false);
    *out = std::move(t);
    return Status::ok;
  } catch (...) {  // allocation only
    rdma_why_ = "out of memory";
    return Status::unavailable;
  }
#else
  (void)leaders, (void)map, (void)rank, (void)oversubscribed, (void)stage, (void)first_rank,
      (void)out;
  rdma_why_ = "built without verbs headers";
  return Status::unavailable;
#endif
}

bool HierEngine::try_zcopy(MPI_Comm node_comm, const hier::NodeMap& map, int rank, int leader,
                           bool rdma_ok) noexcept {
#if MLXA2A_HAVE_VERBS
  try {
    const EngineSettings& s = settings_;
    const mlx5::Verbs* v = mlx5::load_verbs(s.net.verbs_library.c_str());
    std::shared_ptr<mlx5::Device> dev;
    const int node = map.node_of(rank);
    if (map.leaders(node)[0] == map.index_in_node(rank) && rdma_ok) {
      // A message lists at most one SGE per block (the node's ranks x the
      // remote node's); its WRs must fit the send queue at once.
      std::size_t blocks = 0;
      for (int m = 0; m < map.nodes(); ++m) {
        blocks = std::max(blocks, static_cast<std::size_t>(map.node_size(node)) *
                                      static_cast<std::size_t>(map.node_size(m)));
      }
      const std::size_t sge = rdma_gather_sge_ == 0 ? 1 : rdma_gather_sge_;
      if ((blocks + sge - 1) / sge <= mlx5::RdmaLeaderTransport::kMaxGatherWrs) {
        std::string why;
        if (mlx5::EndpointPool* pool = mlx5::EndpointPool::get(mlx5::NetOptions{}, &why)) {
          dev = pool->device();
        }
      }
    }
    mlx5::SharedPdOptions pd_opt;
    pd_opt.leader = leader;
    pd_opt.timeout_ms = static_cast<int>(std::min<std::uint32_t>(s.net.timeout_ms, 60000));
    MpiGroupBootstrap boot(node_comm);
    std::unique_ptr<mlx5::ZeroCopySender> sender;
    const bool fits = dev != nullptr;
    if (mlx5::ZeroCopySender::create(v, boot, std::move(dev), pd_opt, s.rcache, &sender,
                                     &zcopy_why_) != Status::ok) {
      // The node only hears "the leader has no device"; the leader says why.
      if (rdma_ok && !fits) zcopy_why_ = "a message's blocks need more WRs than the send queue";
      return false;
    }
    zcopy_ = std::move(sender);
    return true;
  } catch (...) {  // allocation only
    zcopy_why_ = "out of memory";
    return false;
  }
#else
  (void)node_comm, (void)map, (void)rank, (void)leader, (void)rdma_ok;
  zcopy_why_ = "built without verbs headers";
  return false;
#endif
}

}  // namespace mlxa2a::core::mpi
