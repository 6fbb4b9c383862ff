#include "core/mpi/comm_state.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

#include "core/log.h"
#if MLXA2A_HAVE_VERBS
#include "core/mlx5/qos.h"
#endif
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

// Immutable once made, except that release_all() frees the group at the start
// of MPI_Finalize (nothing derives after that). Every live origin is linked into
// one process-wide list (not keyed by any handle), so that MPI_Finalize can
// free their groups while MPI calls are still allowed.
class SplitOrigin {
 public:
  // nullptr when team's node map is not usable, or on an MPI or allocation
  // failure.
  static std::shared_ptr<const SplitOrigin> make(MPI_Comm comm, const Team& team) noexcept;
  // From a map discovered without a team (Team::discover).
  static std::shared_ptr<const SplitOrigin> make(MPI_Comm comm, Team::Origin map) noexcept;
  ~SplitOrigin();
  SplitOrigin(const SplitOrigin&) = delete;
  SplitOrigin& operator=(const SplitOrigin&) = delete;

  const Team::Origin& map() const { return map_; }
  MPI_Group group() const { return group_; }
  static void release_all() noexcept;

 private:
  SplitOrigin() = default;
  void free_group() noexcept;

  Team::Origin map_;
  MPI_Group group_ = MPI_GROUP_NULL;
  bool linked_ = false;  // set once by make(), before the origin is shared
  SplitOrigin* prev_ = nullptr;
  SplitOrigin* next_ = nullptr;

  static std::mutex mutex_;
  static SplitOrigin* head_;  // guarded by mutex_
};

std::mutex SplitOrigin::mutex_;
SplitOrigin* SplitOrigin::head_ = nullptr;

std::shared_ptr<const SplitOrigin> SplitOrigin::make(MPI_Comm comm, const Team& team) noexcept {
  Team::Origin map;
  if (!team.split_origin(&map)) return nullptr;
  return make(comm, std::move(map));
}

std::shared_ptr<const SplitOrigin> SplitOrigin::make(MPI_Comm comm, Team::Origin map) noexcept {
  std::shared_ptr<SplitOrigin> o;
  try {
    o.reset(new SplitOrigin);  // the control block may throw too
  } catch (...) {
    return nullptr;
  }
  o->map_ = std::move(map);
  MPI_Group group = MPI_GROUP_NULL;
  if (PMPI_Comm_group(comm, &group) != MPI_SUCCESS) return nullptr;
  std::lock_guard lock(mutex_);
  o->group_ = group;
  o->linked_ = true;
  o->next_ = head_;
  if (head_) head_->prev_ = o.get();
  head_ = o.get();
  return o;
}

void SplitOrigin::free_group() noexcept {
  if (group_ != MPI_GROUP_NULL) PMPI_Group_free(&group_);
  group_ = MPI_GROUP_NULL;
}

SplitOrigin::~SplitOrigin() {
  if (!linked_) return;
  std::lock_guard lock(mutex_);
  if (prev_) prev_->next_ = next_;
  else head_ = next_;
  if (next_) next_->prev_ = prev_;
  free_group();
}

void SplitOrigin::release_all() noexcept {
  std::lock_guard lock(mutex_);
  for (SplitOrigin* o = head_; o; o = o->next_) o->free_group();
}

namespace {
// MPI_COMM_WORLD's node map, discovered at MPI_Init (discover_world_origin):
// every intracommunicator of world's processes that has no state of its own
// derives its team from it at its first alltoall, as a dup or split child of
// a communicator with a team does - no node discovery per communicator.
// Written once at init, read by any thread after; reset before finalize.
std::shared_ptr<const SplitOrigin> g_world_origin;
}  // namespace

bool discover_world_origin(const config::Settings& settings) noexcept {
  Team::Origin map;
  if (!Team::discover(MPI_COMM_WORLD, settings, &map)) return false;
  g_world_origin = SplitOrigin::make(MPI_COMM_WORLD, std::move(map));
  return g_world_origin != nullptr;
}

const Team::Origin* world_origin_map() noexcept {
  return g_world_origin ? &g_world_origin->map() : nullptr;
}

void release_split_origins() noexcept {
  SplitOrigin::release_all();
  g_world_origin.reset();
}

namespace {

// A per-thread memo of the last communicator looked up, because an attribute
// lookup costs ~35 ns in Open MPI 4.1 — more than the whole fall-through budget.
// A handle value can only be reused after MPI_Comm_free, and freeing any
// communicator that carries our state runs comm_state_delete, which bumps the
// epoch when the state was ever memoised (a split child that is freed unused
// leaves the parent's memo valid); so a memo whose epoch is current cannot
// name a recycled handle. It only ever holds states whose team is no longer
// pending.
using detail::g_epoch;
using detail::Memo;
using detail::t_memo;

CommState* memoise(MPI_Comm comm, CommState* state, std::uint64_t epoch) {
  state->memoized = true;
  t_memo = Memo{comm, state, epoch};
  return state;
}

}  // namespace

int comm_state_delete(MPI_Comm, int, void* attr, void*) {
  auto* state = static_cast<CommState*>(attr);
  if (state->memoized) g_epoch.fetch_add(1, std::memory_order_acq_rel);
  delete state;
  return MPI_SUCCESS;
}

namespace {

void trace_team(const CommState& st, const char* how) {
  if (Runtime::instance().coll_trace() != config::CollTrace::Debug) return;
  // leaders: of this rank's node when the hierarchical engine is built (a
  // derived team builds it at its first call that selects it).
  const EngineProps* p = st.team->engine_props();
  // no-zcopy-because: only where zero-copy was asked for (threshold not 0)
  // and refused at set-up (a derived team decides at its first call).
  const bool zcopy_refused = st.caps.rdma && !st.caps.zcopy && !st.team->zcopy_why().empty() &&
                             Runtime::instance().settings().net.zcopy_threshold != 0;
#if MLXA2A_HAVE_VERBS
  // fabric: this process's device, port and QoS, on leaders that opened one.
  const std::string fabric = st.caps.rdma ? mlx5::fabric_summary() : std::string();
#else
  const std::string fabric;
#endif
  // targets: a leader's remote nodes in the order it sends to them.
  const bool targets = p && !p->targets.empty();
  log::trace("team id=%llu np=%d nodes=%d shm=%d hier=%d rdma=%d zcopy=%d leaders=%d slot=%zu "
             "oversubscribed=%d cma=%d %s%s%s%s%s%s%s%s%s",
             static_cast<unsigned long long>(st.id), st.team->size(), st.caps.nodes, st.caps.shm,
             st.caps.hier, st.caps.rdma, st.caps.zcopy,
             p ? p->leaders_here : 0, p ? p->stage_bytes : std::size_t{0},
             st.team->oversubscribed(),
             p && p->kind == EngineProps::Kind::node && p->cma_enabled, how,
             st.caps.hier && !st.caps.rdma ? " no-rdma-because=" : "",
             st.caps.hier && !st.caps.rdma ? st.team->rdma_why().c_str() : "",
             zcopy_refused ? " no-zcopy-because=" : "",
             zcopy_refused ? st.team->zcopy_why().c_str() : "",
             targets ? " targets=" : "", targets ? p->targets.c_str() : "",
             fabric.empty() ? "" : " ",
             fabric.c_str());
}

// The state attached to comm (nullptr if none) in *out; false on an MPI error.
bool attached(MPI_Comm comm, int keyval, CommState** out) {
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &attr, &found) != MPI_SUCCESS) return false;
  *out = found ? static_cast<CommState*>(attr) : nullptr;
  return true;
}

// The pending team of a state attached by derive_comm_state(). Local. Every
// rank of comm has a pending state (the parent's origin existed on all its
// ranks or on none), so all derive alike; only a rank-local failure (memory,
// an MPI error) leaves one rank without a team.
void finish_derivation(CommState& st, MPI_Comm comm) {
  st.pending = false;
  st.id = Runtime::instance().next_comm_id();
  st.team = Team::derive(st.origin->map(), st.origin->group(), comm);
  if (!st.team) {
    MLXA2A_LOG(Error, "cannot derive the team of a split communicator; it uses PMPI");
    st.origin.reset();
    return;
  }
  st.caps = st.team->caps();
  trace_team(st, "derived");
}

}  // namespace

namespace {

// A pending state for a child of parent (whose state is ps), deriving from
// ps's origin (made now from ps's team if it has none); nullptr when ps
// cannot be derived from or on an allocation or MPI failure. Local.
CommState* pending_child(MPI_Comm parent, CommState* ps) {
  if (!ps || ps->inter) return nullptr;
  if (!ps->origin) {
    if (!ps->team) return nullptr;
    ps->origin = SplitOrigin::make(parent, *ps->team);
    if (!ps->origin) return nullptr;
  }
  auto* state = new (std::nothrow) CommState;
  if (!state) return nullptr;
  state->pending = true;
  state->origin = ps->origin;
  return state;
}

}  // namespace

void derive_comm_state(MPI_Comm parent, MPI_Comm child, int keyval) {
  CommState* ps = nullptr;
  if (t_memo.comm == parent && t_memo.epoch == g_epoch.load(std::memory_order_acquire)) {
    ps = t_memo.state;
  } else if (!attached(parent, keyval, &ps)) {
    return;
  }
  CommState* state = pending_child(parent, ps);
  if (state && PMPI_Comm_set_attr(child, keyval, state) != MPI_SUCCESS) delete state;
}

int comm_state_copy(MPI_Comm parent, int, void*, void* attr_in, void* attr_out, int* flag) {
  // MPI_Comm_dup (and idup, dup_with_info): the child has the parent's group
  // in the parent's order on every rank, so it derives its team like a split
  // child - no node discovery, no collective before its first call.
  *flag = 0;
  try {
    CommState* state = pending_child(parent, static_cast<CommState*>(attr_in));
    if (state) {
      *static_cast<void**>(attr_out) = state;
      *flag = 1;
    }
  } catch (...) {  // nothing may cross MPI's callback
  }
  return MPI_SUCCESS;
}

CommState* comm_state(MPI_Comm comm, int keyval) {
  const std::uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  if (t_memo.comm == comm && t_memo.epoch == epoch) return t_memo.state;
  CommState* state = nullptr;
  if (!attached(comm, keyval, &state)) return nullptr;
  if (state) {
    if (state->pending) finish_derivation(*state, comm);
    return memoise(comm, state, epoch);
  }
  state = new (std::nothrow) CommState;
  if (!state) return nullptr;
  state->id = Runtime::instance().next_comm_id();
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
    delete state;
    return nullptr;
  }
  state->inter = inter != 0;
  // inter is the same on every rank, so either all ranks build the team here
  // or none does. Without a team the communicator runs no engine. A
  // communicator of world's processes derives from world's map (local);
  // members outside world (spawned, connected) are outside it on every
  // rank's world alike, so then every rank builds.
  if (!state->inter && comm != MPI_COMM_WORLD && g_world_origin) {
    state->origin = g_world_origin;
    state->team = Team::derive(g_world_origin->map(), g_world_origin->group(), comm);
    if (state->team) {
      state->caps = state->team->caps();
      trace_team(*state, "derived");
    } else {
      state->origin.reset();
    }
  }
  if (!state->inter && !state->team) {
    state->team = Team::create(comm, Runtime::instance().settings());
    if (state->team) {
      state->caps = state->team->caps();
      trace_team(*state, "built");
    }
  }
  if (PMPI_Comm_set_attr(comm, keyval, state) != MPI_SUCCESS) {
    delete state;
    return nullptr;
  }
  return memoise(comm, state, epoch);
}

}  // namespace mlxa2a::core::mpi
