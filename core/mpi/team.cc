#include "core/mpi/team.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>

#include "core/log.h"
#include "core/mpi/engine_pool.h"
#include "core/mpi/group_bootstrap.h"
#include "core/mpi/leader_transport.h"
#include "core/mpi/runtime.h"
#include "core/mpi/topology.h"
#if MLXA2A_HAVE_VERBS
#include "core/mlx5/rdma_transport.h"
#include "core/mlx5/zcopy_sender.h"
#include "core/rcache_options.h"
#endif

namespace mlxa2a::core::mpi {

namespace {

// The shm Bootstrap over a node communicator: PMPI collectives, set-up only.
class MpiBootstrap final : public shm::Bootstrap {
 public:
  MpiBootstrap(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  bool broadcast(void* buf, std::size_t len, int root) override {
    // Set-up messages are a few hundred bytes; never near INT_MAX.
    return PMPI_Bcast(buf, static_cast<int>(len), MPI_BYTE, root, comm_) == MPI_SUCCESS;
  }
  bool barrier() override { return PMPI_Barrier(comm_) == MPI_SUCCESS; }

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
};

// While a rank waits in the shm engine it makes no MPI call, yet a peer may
// need this rank's MPI progress to reach the alltoall (e.g. it waits in
// MPI_Recv for a rendezvous message this rank MPI_Isend'ed before the
// alltoall — a correct MPI program). The waiter calls this about once per
// millisecond while yielding; PMPI_Iprobe drives the MPI library's progress
// engine without receiving anything.
bool drive_mpi_progress(MPI_Comm comm) {
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
  return false;
}

}  // namespace

// A healthy engine outlives its communicator in the pool (engine_pool.h).
Team::~Team() { EnginePool::instance().give(std::move(shm_), std::move(pool_key_)); }

shm::Status Team::run(const char* send, char* recv, std::size_t bytes) noexcept {
  if (shm_) return shm_->run(send, recv, bytes);
  if (hier_) {
    if (bytes != 0) ++engine_calls_;  // run() returns at once on 0, alike on every rank
    const shm::Status st = hier_->run(send, recv, bytes);
    // invalid_argument is refused before anything is shared (a local misuse).
    if (st != shm::Status::ok && st != shm::Status::invalid_argument) contain(st);
    return st;
  }
  if (size_ == 1) {  // one rank: the whole exchange is a copy
    std::memcpy(recv, send, bytes);
    return shm::Status::ok;
  }
  return shm::Status::broken;  // no engine: selection never sends a call here
}

shm::Status Team::run(const char* send, char* recv, std::size_t bytes,
                      tuning::Candidate path) noexcept {
  using tuning::Candidate;
  if (shm_ && (path == Candidate::line || path == Candidate::copy || path == Candidate::cma)) {
    const shm::Path p = path == Candidate::line   ? shm::Path::line
                        : path == Candidate::copy ? shm::Path::copy
                                                  : shm::Path::cma;
    return shm_->run(send, recv, bytes, p);
  }
  if (path == Candidate::zcopy && hier_ && zcopy_ && caps_.zcopy) {
    return hier_->run(send, recv, bytes, zcopy_.get());
  }
  // hier and rdma: the hierarchical engine, whose leaders use the transport
  // agreed at set-up (caps().rdma says which).
  return run(send, recv, bytes);
}

int Team::ranks_per_node() const noexcept {
  // Node ids name a node's first rank, so a node's members count its id.
  try {
    std::vector<int> members(node_ids_.size(), 0);
    for (int id : node_ids_) {
      if (id >= 0 && static_cast<std::size_t>(id) < members.size()) ++members[id];
    }
    return members.empty() ? 0 : *std::max_element(members.begin(), members.end());
  } catch (...) {
    return 0;  // allocation only; the layout then matches no tune-file entry
  }
}

void Team::abandon() noexcept {
  if (shm_) shm_->abandon();
  if (hier_) {
    // Counted as the engine call it stands for: the peers' one fails.
    ++engine_calls_;
    hier_->abandon();
    contain(shm::Status::broken);
  }
}

void Team::contain(shm::Status st) noexcept {
  // Only RDMA teams: with PMPI leaders the engine stays broken (docs/hier.md).
  if (caps_.rdma) containment_.fail(engine_calls_, shm::to_string(st));
}

bool Team::contained_call(std::size_t bytes) noexcept {
  if (bytes == 0) return true;  // numbered like run(), which needs no peer for it
  ++engine_calls_;
  return containment_.substitute(engine_calls_, Runtime::instance().settings().net_timeout_ms) ==
         Containment::Outcome::pmpi;
}

bool Team::resync(MPI_Comm comm) noexcept {
  if (!shm_) return false;  // only the single-node engine reports size_mismatch
  std::array<std::uint64_t, 2> point = shm_->sync_point();
  if (PMPI_Allreduce(MPI_IN_PLACE, point.data(), 2, MPI_UINT64_T, MPI_MAX, comm) != MPI_SUCCESS) {
    shm_->abandon();
    return false;
  }
  shm_->resync(point);
  ++resyncs_;
  return true;
}

char* Team::scratch(int which, std::size_t bytes) noexcept {
  Buffer& b = scratch_[which];
  if (b.size < bytes) {
    b.data.reset(new (std::nothrow) char[bytes]);
    b.size = b.data ? bytes : 0;
  }
  return b.data.get();
}

namespace {

// Open MPI's own alltoall beats ours for large blocks when ranks outnumber
// cores; MPICH's spins there and never does (core/selection.h).
#if defined(MLXA2A_FAMILY_OMPI)
constexpr bool kPmpiWinsOversubscribed = true;
#else
constexpr bool kPmpiWinsOversubscribed = false;
#endif

shm::Options engine_options(MPI_Comm comm, bool oversubscribed) {
  const config::Settings& s = Runtime::instance().settings();
  shm::Options opt;
  opt.oversubscribed = oversubscribed;
  opt.cma_threshold = s.shm_cma_threshold;
  opt.cma_threshold_oversubscribed = s.shm_cma_threshold_oversubscribed;
  // The segment holds 2 x ranks x slot bytes: memory per communicator.
  opt.slot_capacity = s.shm_slot_size;
  opt.slot_capacity_oversubscribed = s.shm_slot_size_oversubscribed;
  opt.abort_requested = [comm] { return drive_mpi_progress(comm); };
  return opt;
}

// The comm rank of the first rank of this rank's node communicator: a node id
// every rank of the node computes alike, with no communication.
int node_leader(MPI_Comm comm, MPI_Comm node) {
  MPI_Group cg = MPI_GROUP_NULL, ng = MPI_GROUP_NULL;
  int zero = 0, leader = -1;
  if (PMPI_Comm_group(comm, &cg) == MPI_SUCCESS && PMPI_Comm_group(node, &ng) == MPI_SUCCESS) {
    PMPI_Group_translate_ranks(ng, 1, &zero, cg, &leader);
  }
  if (cg != MPI_GROUP_NULL) PMPI_Group_free(&cg);
  if (ng != MPI_GROUP_NULL) PMPI_Group_free(&ng);
  return leader;
}

// The MPI_COMM_WORLD ranks of comm's members in comm's rank order; empty
// when a member is not in MPI_COMM_WORLD (spawned or connected processes) or
// on an MPI error. Local.
std::vector<int> world_ranks_of(MPI_Comm comm, int size) {
  static const MPI_Group world = [] {
    MPI_Group g = MPI_GROUP_NULL;
    if (PMPI_Comm_group(MPI_COMM_WORLD, &g) != MPI_SUCCESS) g = MPI_GROUP_NULL;
    return g;  // kept for the process's life (a handle, no segment)
  }();
  std::vector<int> ranks(static_cast<std::size_t>(size)), out(ranks.size(), MPI_UNDEFINED);
  for (int r = 0; r < size; ++r) ranks[r] = r;
  MPI_Group cg = MPI_GROUP_NULL;
  bool ok = world != MPI_GROUP_NULL && PMPI_Comm_group(comm, &cg) == MPI_SUCCESS &&
            PMPI_Group_translate_ranks(cg, size, ranks.data(), world, out.data()) == MPI_SUCCESS;
  if (cg != MPI_GROUP_NULL) PMPI_Group_free(&cg);
  for (int w : out) ok = ok && w != MPI_UNDEFINED;
  if (!ok) out.clear();
  return out;
}

int count_nodes(const std::vector<int>& ids) {
  int nodes = 0;
  for (std::size_t r = 0; r < ids.size(); ++r) nodes += ids[r] == static_cast<int>(r);
  return nodes;
}

}  // namespace

std::unique_ptr<Team> Team::create(MPI_Comm comm, const config::Settings& settings) noexcept {
  std::unique_ptr<Team> team(new (std::nothrow) Team);
  if (!team) return nullptr;
  PMPI_Comm_size(comm, &team->size_);
  if (team->size_ == 1) {
    team->caps_ = Capabilities{.shm = true, .rdma = false, .nodes = 1};
    team->node_ids_.assign(1, 0);
    return team;
  }
  // Per rank: {node id, set-up failed}.
  int mine[2] = {-1, 1};
  std::vector<int> all;
  NodeComm node;  // kept until the hierarchical engine is built
  try {
    all.resize(2 * static_cast<std::size_t>(team->size_));
    if (node_of_comm(comm, settings.node_layout, &node)) {
      mine[0] = node_leader(comm, node.comm.get());
      mine[1] = mine[0] < 0 ? 1 : 0;
    }
    team->oversubscribed_ = node.oversubscribed;
    // local_size == size is true on every rank or on none, so all ranks of a
    // single-node team build the engine and no rank of a multi-node one does.
    if (mine[1] == 0 && node.local_size == team->size_) {
      const shm::Options opt = engine_options(comm, node.oversubscribed);
      MpiBootstrap boot(node.comm.get(), node.local_rank, node.local_size);
      const shm::Status st = shm::NodeAlltoall::create(boot, opt, team->shm_);
      if (st != shm::Status::ok) {
        MLXA2A_LOG_LIMITED(Warn, "shared-memory set-up failed (%s); this communicator uses PMPI",
                   shm::to_string(st));
        mine[1] = 1;
      }
    }
  } catch (...) {
    // Only allocation throws here; without the buffer this rank cannot take
    // part in the agreement, which an out-of-memory job will not survive anyway.
    mine[1] = 1;
    if (all.size() != 2 * static_cast<std::size_t>(team->size_)) return nullptr;
  }
  bool failed = PMPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm) != MPI_SUCCESS;
  team->node_ids_.resize(static_cast<std::size_t>(team->size_));
  for (int r = 0; r < team->size_ && !failed; ++r) {
    team->node_ids_[r] = all[2 * r];
    failed = all[2 * r + 1] != 0 || all[2 * r] < 0 || all[2 * r] >= team->size_;
  }
  if (failed) {
    team->node_ids_.clear();
    team->caps_.nodes = 1;  // unknown; only "not usable" matters
    team->caps_.shm = false;
  } else {
    team->caps_.nodes = count_nodes(team->node_ids_);
    team->caps_.shm = team->caps_.nodes == 1;
    set_auto_ranges(team->caps_, team->size_, team->oversubscribed_, kPmpiWinsOversubscribed);
    // Every rank saw the same node count: all build the engine or none does.
    if (team->caps_.nodes > 1) {
      team->caps_.hier = team->setup_hier(comm, node.comm.get(), settings.shm_slot_size);
    }
  }
  if (!team->caps_.shm) team->shm_.reset();
  return team;
}

namespace {

// Whether this rank leads its node under the policy: needs every local rank's
// CPU domain for numa/socket (one PMPI_Allgather on the node), else nothing.
bool choose_leadership(const config::LeaderPolicy& policy, MPI_Comm node_comm, int local_rank,
                       int local_size, bool* ok) {
  std::vector<int> domains(static_cast<std::size_t>(local_size), -1);
  if (policy.needs_domains()) {
    int mine = cpu_domain(policy.kind == config::LeaderPolicy::Kind::Numa);
    if (PMPI_Allgather(&mine, 1, MPI_INT, domains.data(), 1, MPI_INT, node_comm) != MPI_SUCCESS) {
      *ok = false;
    }
  }
  const std::vector<int> leaders = config::choose_leaders(policy, domains);
  return std::find(leaders.begin(), leaders.end(), local_rank) != leaders.end();
}

}  // namespace

bool Team::setup_hier(MPI_Comm comm, MPI_Comm node_comm, std::size_t stage_bytes) noexcept {
  // Every step below runs on every rank whatever happened before, so that no
  // rank skips a collective its peers are in; the Allreduce at the end agrees.
  int failed = 0;
  rdma_why_.clear();
  try {
    int rank = 0, local_rank = 0, local_size = 1;
    PMPI_Comm_rank(comm, &rank);
    if (PMPI_Comm_rank(node_comm, &local_rank) != MPI_SUCCESS ||
        PMPI_Comm_size(node_comm, &local_size) != MPI_SUCCESS) {
      failed = 1;
    }
    bool ok = true;
    const bool lead = choose_leadership(Runtime::instance().settings().leaders, node_comm,
                                        local_rank, local_size, &ok);
    failed |= !ok;
    // One Allgather: who leads (the transport addresses every node's leaders)
    // and the staging size, which sets the rounds and so must be the same on
    // every rank although the switch is node-local (the largest wins).
    const std::uint64_t mine[2] = {lead ? 1u : 0u, stage_bytes};
    std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(size_));
    if (PMPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm) != MPI_SUCCESS) {
      failed = 1;
    }
    std::vector<int> leads(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      leads[r] = all[2 * r] != 0;
      stage_bytes = std::max<std::size_t>(stage_bytes, all[2 * r + 1]);
    }
    const hier::NodeMap map(node_ids_, leads);

    std::unique_ptr<shm::NodeStage> stage;
    const shm::Options opt = engine_options(comm, oversubscribed_);
    const std::size_t area = hier::HierAlltoall::area_bytes(size_, local_size, stage_bytes);
    MpiBootstrap boot(node_comm, local_rank, local_size);
    if (const shm::Status st = shm::NodeStage::create(boot, opt, area, area, stage);
        st != shm::Status::ok) {
      MLXA2A_LOG_LIMITED(Warn, "hierarchical staging set-up failed (%s)", shm::to_string(st));
      failed = 1;
    }
    // The leaders' communicator, ordered by node, then by leader index.
    const int node = map.node_of(rank);
    OwnedComm leaders;
    if (PMPI_Comm_split(comm, lead ? 0 : MPI_UNDEFINED, map.ranks_before(node) + local_rank,
                        leaders.out()) != MPI_SUCCESS) {
      failed = 1;
    }
    std::vector<int> first_rank;
    for (int m = 0, at = 0; m < map.nodes(); ++m) {
      first_rank.push_back(at);
      at += map.leader_count(m);
    }
    // The RDMA transport: tried by every leader whatever failed before (its
    // set-up is collective over the leaders), then agreed on by every rank
    // together with the other failures, so all ranks pick the same transport.
    std::unique_ptr<hier::LeaderTransport> rdma;
    int flags[3] = {failed, 1, 1};  // {set-up failed, RDMA failed, zero-copy failed}
    if (lead && leaders.get() != MPI_COMM_NULL) {
      flags[1] = try_rdma(leaders.get(), map, rank, stage.get(), first_rank, &rdma) ? 0 : 1;
    } else if (!lead) {
      flags[1] = 0;  // only leaders have a say
    }
    // Zero-copy (docs/zerocopy.md): nodes with one leader, switch not 0;
    // the same on every rank of a node, so all of it runs the collective.
    zcopy_why_ = "MLXA2A_NET_ZCOPY_THRESHOLD is 0";
    if (Runtime::instance().settings().net_zcopy_threshold != 0) {
      const std::vector<int>& node_leaders = map.leaders(node);
      if (node_leaders.size() != 1) {
        zcopy_why_ = "a node has several leaders";
      } else {
        flags[2] = try_zcopy(node_comm, map, rank, node_leaders[0], lead && flags[1] == 0) ? 0 : 1;
      }
    }
    int any[3] = {1, 1, 1};
    if (PMPI_Allreduce(flags, any, 3, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) failed = 1;
    failed |= any[0];
    caps_.rdma = !any[1];
    if (any[1] && rdma_why_.empty()) rdma_why_ = "RDMA unavailable on another leader";
    caps_.zcopy = caps_.rdma && !any[2];
    if (caps_.zcopy) {
      zcopy_why_.clear();
    } else {
      zcopy_.reset();
      if (!caps_.rdma) zcopy_why_ = "no RDMA";
      else if (!flags[2]) zcopy_why_ = "unavailable on another node";
    }
    if (!failed) {
      std::unique_ptr<hier::LeaderTransport> transport;
      if (lead && caps_.rdma) {
        transport = std::move(rdma);
      } else if (lead) {
        transport = std::make_unique<MpiLeaderTransport>(std::move(leaders), std::move(first_rank),
                                                         oversubscribed_);
      }
      const shm::Status st =
          hier::HierAlltoall::create(node_ids_, leads, rank, stage_bytes, std::move(stage),
                                     std::move(transport), hier_);
      if (st != shm::Status::ok) {
        MLXA2A_LOG_LIMITED(Warn, "hierarchical engine set-up failed (%s)", shm::to_string(st));
        failed = 1;
      }
    }
  } catch (...) {  // allocation only
    failed = 1;
  }
  int any_failed = 1;
  if (PMPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) {
    any_failed = 1;
  }
  // The containment agreement's communicator (RDMA teams only; every rank
  // knows caps_.rdma alike); without it the team does not use RDMA.
  if (!any_failed && caps_.rdma) {
    int armed = containment_.arm(comm) ? 1 : 0, all_armed = 0;
    if (PMPI_Allreduce(&armed, &all_armed, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS ||
        !all_armed) {
      any_failed = 1;
      rdma_why_ = "containment set-up failed";
    }
  }
  if (any_failed) {
    hier_.reset();
    zcopy_.reset();
    caps_.rdma = false;
    caps_.zcopy = false;
  }
  if (!any_failed && !caps_.rdma) {
    MLXA2A_LOG(Info, "multi-node team: leaders exchange over PMPI (%s)", rdma_why_.c_str());
  }
  if (!any_failed && caps_.rdma && !caps_.zcopy) {
    MLXA2A_LOG(Info, "multi-node team: no zero-copy path, ranks stage their blocks (%s)",
               zcopy_why_.c_str());
  }
  return !any_failed;
}

bool Team::try_rdma(MPI_Comm leaders, const hier::NodeMap& map, int rank,
                    const shm::NodeStage* stage, const std::vector<int>& first_rank,
                    std::unique_ptr<hier::LeaderTransport>* out) noexcept {
#if MLXA2A_HAVE_VERBS
  try {
    const config::Settings& s = Runtime::instance().settings();
    mlx5::NetOptions opt;
    for (const config::Device& d : s.net_devices) opt.devices.push_back({d.name, d.port});
    opt.gid_index = s.net_gid_index;
    opt.timeout_ms = s.net_timeout_ms;
    opt.qp_timeout = s.net_qp_timeout;
    opt.retry_count = s.net_retry_count;
    opt.verbs_library = s.net_verbs_library;
    opt.oversubscribed = oversubscribed_;
    // Not the team's communicator: a leader waiting for another node makes
    // no MPI call, yet a local peer may need this rank's MPI progress.
    opt.idle = [] { drive_mpi_progress(MPI_COMM_WORLD); };
    const hier::Plan plan(map, rank, 64);
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
    const Status st = mlx5::RdmaLeaderTransport::create(boot, areas, first_rank, peers, opt, &t,
                                                        &rdma_why_);
    if (st != Status::ok) return false;
    rdma_gather_sge_ = t->gather_sge();
    *out = std::move(t);
    return true;
  } catch (...) {  // allocation only
    rdma_why_ = "out of memory";
    return false;
  }
#else
  (void)leaders, (void)map, (void)rank, (void)stage, (void)first_rank, (void)out;
  rdma_why_ = "built without verbs headers";
  return false;
#endif
}

bool Team::try_zcopy(MPI_Comm node_comm, const hier::NodeMap& map, int rank, int leader,
                     bool rdma_ok) noexcept {
#if MLXA2A_HAVE_VERBS
  try {
    const config::Settings& s = Runtime::instance().settings();
    const mlx5::Verbs* v = mlx5::load_verbs(s.net_verbs_library.c_str());
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
    pd_opt.timeout_ms = static_cast<int>(std::min<std::uint32_t>(s.net_timeout_ms, 60000));
    std::string error;
    const rcache::Options cache_opt = rcache_options(s, &error);
    MpiGroupBootstrap boot(node_comm);
    std::unique_ptr<mlx5::ZeroCopySender> sender;
    const bool fits = dev != nullptr;
    if (mlx5::ZeroCopySender::create(v, boot, std::move(dev), pd_opt, cache_opt, &sender,
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

bool Team::split_origin(Origin* out) const noexcept {
  if (node_ids_.empty()) return false;
  try {
    out->node_ids = node_ids_;
  } catch (...) {
    return false;
  }
  out->oversubscribed = oversubscribed_;
  out->rdma = caps_.rdma;
  return true;
}

std::unique_ptr<Team> Team::derive(const Origin& parent, MPI_Group parent_group,
                                   MPI_Comm child) noexcept {
  if (parent.node_ids.empty()) return nullptr;
  std::unique_ptr<Team> team(new (std::nothrow) Team);
  if (!team) return nullptr;
  PMPI_Comm_size(child, &team->size_);
  try {
    std::vector<int> ranks(static_cast<std::size_t>(team->size_));
    std::vector<int> in_parent(ranks.size(), MPI_UNDEFINED);
    for (int r = 0; r < team->size_; ++r) ranks[r] = r;
    MPI_Group cg = MPI_GROUP_NULL;
    if (PMPI_Comm_group(child, &cg) == MPI_SUCCESS) {
      PMPI_Group_translate_ranks(cg, team->size_, ranks.data(), parent_group, in_parent.data());
    }
    if (cg != MPI_GROUP_NULL) PMPI_Group_free(&cg);
    // Child node ids follow create()'s convention (a node's id is its lowest
    // child rank), so count_nodes() works on both.
    std::vector<int> first_child(parent.node_ids.size(), -1);
    team->node_ids_.resize(ranks.size());
    for (int r = 0; r < team->size_; ++r) {
      const int p = in_parent[r];
      if (p < 0 || p >= static_cast<int>(parent.node_ids.size())) return nullptr;
      int& first = first_child[static_cast<std::size_t>(parent.node_ids[p])];
      if (first < 0) first = r;
      team->node_ids_[r] = first;
    }
  } catch (...) {
    return nullptr;
  }
  team->oversubscribed_ = parent.oversubscribed;
  team->caps_.nodes = count_nodes(team->node_ids_);
  team->caps_.shm = team->caps_.nodes == 1;
  // Tentative until complete_setup() has built the engine and agreed on it.
  team->caps_.hier = team->caps_.nodes > 1;
  // Tentative too: where the parent's leaders had RDMA, the child's (a subset
  // of the same processes) are expected to, so the selection asks for it.
  team->caps_.rdma = team->caps_.hier && parent.rdma;
  set_auto_ranges(team->caps_, team->size_, team->oversubscribed_, kPmpiWinsOversubscribed);
  team->setup_pending_ = (team->caps_.shm && team->size_ > 1) || team->caps_.hier;
  return team;
}

bool Team::complete_setup(MPI_Comm comm) noexcept {
  if (!setup_pending_) return caps_.shm || caps_.hier;
  setup_pending_ = false;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  if (caps_.hier) {
    // The derived node ids are equal on all ranks of a node: split by them.
    OwnedComm node;
    if (PMPI_Comm_split(comm, node_ids_[static_cast<std::size_t>(rank)], rank, node.out()) !=
        MPI_SUCCESS) {
      caps_.hier = false;  // an MPI error here is fatal to the job in practice
      return false;
    }
    caps_.hier = setup_hier(comm, node.get(), Runtime::instance().settings().shm_slot_size);
    return caps_.hier;
  }
  shm::Status st = shm::Status::create_failed;
  try {
    const shm::Options opt = engine_options(comm, oversubscribed_);
    // An idle engine of a freed communicator of the same ranks, if every rank
    // has it (one allreduce); else a new segment.
    pool_key_ = {world_ranks_of(comm, size_), oversubscribed_};
    shm_ = EnginePool::instance().acquire(comm, pool_key_, opt);
    if (shm_) {
      st = shm::Status::ok;
      reused_ = true;
    } else {
      MpiBootstrap boot(comm, rank, size_);
      st = shm::NodeAlltoall::create(boot, opt, shm_);
    }
  } catch (...) {
  }
  if (st != shm::Status::ok) {
    // NodeAlltoall::create fails on every rank alike unless MPI itself broke.
    MLXA2A_LOG_LIMITED(Warn, "shared-memory set-up failed (%s); this communicator uses PMPI",
               shm::to_string(st));
    caps_.shm = false;
    shm_.reset();
  }
  return caps_.shm;
}

}  // namespace mlxa2a::core::mpi
