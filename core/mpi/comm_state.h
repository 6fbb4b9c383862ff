// CommState: mlxa2a's state per communicator, an MPI attribute (keyval +
// delete callback), never a map keyed by handles, which MPI reuses after
// MPI_Comm_free. The attribute owns it; the delete callback runs at
// MPI_Comm_free (MPI_Finalize for the predefined ones). No locking: MPI
// serialises the calls on one communicator.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/mpi/team.h"
#include "core/mpi/team_tuner.h"
#include "core/selection.h"

namespace mlxa2a::core::mpi {

// An ancestor's group and a copy of its team's node map, from which the teams
// of communicators split from it (directly or not) are derived (comm_state.cc).
class SplitOrigin;

struct CommState {
  std::uint64_t id = 0;     // per-process sequence number, for traces
  std::uint64_t calls = 0;  // alltoall calls seen on this communicator
  Capabilities caps;        // agreed by all ranks of the communicator
  bool inter = false;       // an intercommunicator: always PMPI
  // Attached by MPI_Comm_split: the team is still to be derived from origin,
  // which comm_state() does (locally) before it returns the state.
  bool pending = false;
  // Some thread's memo has held this state (comm_state.cc): freeing it must
  // then invalidate every memo. Set and read by calls on this communicator.
  bool memoized = false;
  std::unique_ptr<Team> team;  // intracommunicators; owns the shm engine
  // Measured selection (MLXA2A_TUNE=auto), made at the first call that tunes;
  // stays null when the team has nothing to choose (tuner_off then).
  std::unique_ptr<TeamTuner> tuner;
  bool tuner_off = false;
  // The last engine call with plain named types (engine_call.h
  // is_plain_named) and separate buffers. A later call with the same types
  // and counts has the same size, hence the same path on every rank (the
  // tune table and the caps are final once set up; a measured decision holds
  // until its class's next steady-state sample), so it goes straight there.
  // bytes == 0: nothing recorded.
  struct Repeat {
    MPI_Datatype sendtype{};
    MPI_Datatype recvtype{};
    std::int64_t sendcount = 0;
    std::int64_t recvcount = 0;
    std::uint64_t bytes = 0;
    const char* reason = nullptr;  // the selection's, for the trace
    // The route decided (core/plan/plan.h) or measured: pmpi or an engine's.
    Route route = Route::pmpi;
    const char* suffix = "";  // the trace's, after the reason (plan::Plan::suffix)
    // A measured decision still sampled (core/tune/class_tuner.h): the memo
    // serves only calls whose index (*calls + 1, equal on every rank) is
    // below until; that call goes back to selection on every rank.
    const std::uint64_t* calls = nullptr;
    std::uint64_t until = UINT64_MAX;
  } repeat;
  // Where this communicator's team and its children's teams derive from:
  // shared with the ancestor's state and its other descendants, which may
  // outlive it. Made from this communicator's own team at its first split
  // when it has none.
  std::shared_ptr<const SplitOrigin> origin;
};

// MPI copy callback for the comm keyval (MPI_Comm_dup and friends): the
// child gets a pending state deriving from the parent's team, as a split
// child does (derive_comm_state). Local; never fails the dup (no state is
// copied when it cannot derive).
int comm_state_copy(MPI_Comm parent, int keyval, void* extra, void* attr_in, void* attr_out,
                    int* flag);

// MPI delete callback for the comm keyval.
int comm_state_delete(MPI_Comm comm, int keyval, void* attr, void* extra);

// The state of comm, created on first use. Collective when it creates (every
// rank reaches this at the same call on comm): an intracommunicator's Team is
// built then (core/mpi/team.h). nullptr on an MPI error.
CommState* comm_state(MPI_Comm comm, int keyval);

namespace detail {
// The per-thread memo of the last communicator looked up (comm_state.cc says
// why it is safe); in the header so that every MPI_Alltoall's look-up is
// inline. g_epoch: bumped when a memoised state is deleted.
inline std::atomic<std::uint64_t> g_epoch{0};
// Constant-initialised (constinit): Open MPI's MPI_COMM_NULL is a cast address,
// not a constant expression, and a dynamically initialised thread_local costs
// a __tls_get_addr call for its guard on every lookup. The initial epoch can
// never match, so comm's initial value does not matter.
struct Memo {
  MPI_Comm comm{};
  CommState* state = nullptr;
  std::uint64_t epoch = ~std::uint64_t{0};
};
inline constinit thread_local Memo t_memo __attribute__((tls_model("initial-exec")));
}  // namespace detail

// The state of comm if it is this thread's memo of the last communicator
// looked up, else nullptr. No MPI call; never creates or derives anything.
inline CommState* memoised_comm_state(MPI_Comm comm) noexcept {
  const detail::Memo& m = detail::t_memo;
  return m.comm == comm && m.epoch == detail::g_epoch.load(std::memory_order_acquire) ? m.state
                                                                                     : nullptr;
}

// After MPI_Comm_split returned child (not MPI_COMM_NULL): if parent already has
// a state with a team (or a pending one), attaches to child a pending state
// that shares parent's origin; its team is derived at the child's first
// alltoall (no communication; see Team::derive). The first split of a
// communicator whose team was built by Team::create takes its group once
// (PMPI_Comm_group). Otherwise does nothing and the child's state is built at
// its first alltoall. Local; never fails visibly.
void derive_comm_state(MPI_Comm parent, MPI_Comm child, int keyval);

// Collective over MPI_COMM_WORLD, at MPI_Init: discovers world's node map
// (Team::discover) and keeps it as the origin from which every communicator
// without a state of its own derives its team at its first alltoall
// (comm_state). false on every rank when discovery failed (such
// communicators then build their teams, collectively, as before).
bool discover_world_origin(const config::Settings& settings) noexcept;
// MPI_COMM_WORLD's node map as discover_world_origin() found it; nullptr when
// it failed or was not run. Valid until release_split_origins().
const Team::Origin* world_origin_map() noexcept;

// Frees the MPI groups that split origins hold. From Runtime::before_finalize,
// while MPI calls are still allowed: communicators' delete callbacks that run
// later in MPI_Finalize then drop their origins without any MPI call. Nothing
// derives a team after it (no engine runs once finalize began).
void release_split_origins() noexcept;

}  // namespace mlxa2a::core::mpi
