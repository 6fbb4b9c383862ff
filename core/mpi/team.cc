#include "core/mpi/team.h"

#include <algorithm>
#include <new>

#include "core/config/switches.h"
#include "core/log.h"
#include "core/mpi/engine_pool.h"
#include "core/mpi/topology.h"
#include "core/mpi/stacking.h"

namespace mlxa2a::core::mpi {

namespace {

// Open MPI's own alltoall beats ours for large blocks when ranks outnumber
// cores; MPICH's spins there and never does (core/selection.h).
#if defined(MLXA2A_FAMILY_OMPI)
constexpr bool kPmpiWinsOversubscribed = true;
#else
constexpr bool kPmpiWinsOversubscribed = false;
#endif

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

int count_nodes(const std::vector<int>& ids) {
  int nodes = 0;
  for (std::size_t r = 0; r < ids.size(); ++r) nodes += ids[r] == static_cast<int>(r);
  return nodes;
}

}  // namespace

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


// A derived team's engine may serve the next team of the same processes.
Team::~Team() {
  if (engine_) EnginePool::instance().give(std::move(engine_), std::move(pool_key_));
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

bool Team::resync(MPI_Comm comm) noexcept {
  SizeAgreement* s = sizes();
  if (!s || !s->resync(comm)) return false;
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

std::unique_ptr<Team> Team::create(MPI_Comm comm, const config::Settings& settings) noexcept {
  std::unique_ptr<Team> team(new (std::nothrow) Team);
  if (!team) return nullptr;
  PMPI_Comm_size(comm, &team->size_);
  if (team->size_ == 1) {
    team->caps_ = Capabilities{.shm = true, .rdma = false, .nodes = 1};
    try {
      team->node_ids_.assign(1, 0);
    } catch (...) {
      return nullptr;
    }
    EngineRequest req;
    req.comm = comm;
    team->engine_ = make_engine(req, EngineSettings{});
    if (!team->engine_) return nullptr;
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
      team->caps_.nodes = 1;
      team->build_engine(comm, node.comm.get(), node.local_rank, node.local_size, settings);
      if (!team->engine_) mine[1] = 1;
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
      team->build_engine(comm, node.comm.get(), node.local_rank, node.local_size, settings);
    }
  }
  if (!team->caps_.shm && !team->caps_.hier) team->engine_.reset();
  return team;
}

void Team::build_engine(MPI_Comm comm, MPI_Comm node_comm, int local_rank, int local_size,
                        const config::Settings& settings) noexcept {
  std::unique_ptr<Engine> e;
  try {
    EngineRequest req;
    req.comm = comm;
    req.node_comm = node_comm;
    req.size = size_;
    req.local_rank = local_rank;
    req.local_size = local_size;
    req.oversubscribed = oversubscribed_;
    req.node_ids = &node_ids_;
    req.nodes = caps_.nodes;
    e = make_engine(req, EngineSettings::from(settings));
  } catch (...) {  // allocation only
    // A multi-node rank that cannot even build its request would leave its
    // peers in the set-up's collectives; out of memory the job is lost anyway.
  }
  adopt(std::move(e));
}

void Team::adopt(std::unique_ptr<Engine> e) noexcept {
  engine_ = std::move(e);
  if (caps_.nodes > 1) {
    caps_.hier = engine_ != nullptr;
    caps_.rdma = engine_ && engine_->props().rdma;
    caps_.zcopy = engine_ && engine_->props().zcopy;
    try {
      rdma_why_ = engine_ ? engine_->props().rdma_why : std::string();
      zcopy_why_ = engine_ ? engine_->props().zcopy_why : std::string();
    } catch (...) {  // a trace's text only
    }
  }
  reused_ = engine_ && engine_->reused();
}

bool Team::adopt_pooled(MPI_Comm comm, const config::Settings& settings) noexcept {
  shm::Options opt;
  try {
    pool_key_ = {world_ranks_of(comm, size_), node_ids_, oversubscribed_};
    opt = shm_options(settings.shm, comm, oversubscribed_);
  } catch (...) {
    // Allocation only: an empty key proposes nothing, and the rank still
    // takes part in the pool's agreement (collective).
    pool_key_ = {};
  }
  std::unique_ptr<Engine> e = EnginePool::instance().acquire(comm, pool_key_, opt);
  if (!e) return false;
  adopt(std::move(e));
  return true;
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

bool Team::discover(MPI_Comm comm, const config::Settings& settings, Origin* out) noexcept {
  int size = 1;
  PMPI_Comm_size(comm, &size);
  int mine[2] = {-1, 1};  // {node id, failed}
  std::vector<int> all;
  NodeComm node;
  try {
    all.resize(2 * static_cast<std::size_t>(size));
    out->node_ids.assign(static_cast<std::size_t>(size), -1);
    if (node_of_comm(comm, settings.node_layout, &node)) {
      mine[0] = node_leader(comm, node.comm.get());
      mine[1] = mine[0] < 0 ? 1 : 0;
    }
  } catch (...) {  // allocation only: as in create()
    mine[1] = 1;
    if (all.size() != 2 * static_cast<std::size_t>(size)) return false;
  }
  // Failed on any rank (its flag): on every rank.
  bool failed = PMPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm) != MPI_SUCCESS ||
                out->node_ids.size() != static_cast<std::size_t>(size);
  for (int r = 0; r < size && !failed; ++r) {
    out->node_ids[r] = all[2 * r];
    failed = all[2 * r + 1] != 0 || all[2 * r] < 0 || all[2 * r] >= size;
  }
  if (failed) {
    out->node_ids.clear();
    return false;
  }
  out->oversubscribed = node.oversubscribed;
  out->rdma = count_nodes(out->node_ids) > 1;
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
  if (team->size_ == 1) {  // one rank: the exchange is a copy, no set-up
    EngineRequest req;
    req.comm = child;
    team->engine_ = make_engine(req, EngineSettings{});
    if (!team->engine_) return nullptr;
  }
  return team;
}

bool Team::complete_setup(MPI_Comm comm, const config::Settings& settings) noexcept {
  if (!setup_pending_) return caps_.shm || caps_.hier;
  setup_pending_ = false;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  // An idle engine of a freed communicator of the same processes in the same
  // order, if every rank has it (the pool), else a new one.
  if (adopt_pooled(comm, settings)) return true;
  if (caps_.hier) {
    // The derived node ids are equal on all ranks of a node: split by them.
    OwnedComm node;
    if (mpi_own().comm_split(comm, node_ids_[static_cast<std::size_t>(rank)], rank, node.out()) !=
        MPI_SUCCESS) {
      caps_.hier = false;  // an MPI error here is fatal to the job in practice
      caps_.rdma = false;
      return false;
    }
    build_engine(comm, node.get(), 0, 1, settings);
    return caps_.hier;
  }
  // A single-node child: the child communicator is the node communicator.
  build_engine(comm, comm, rank, size_, settings);
  if (!engine_) caps_.shm = false;
  return caps_.shm;
}

}  // namespace mlxa2a::core::mpi
