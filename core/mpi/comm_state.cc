#include "core/mpi/comm_state.h"

#include <atomic>
#include <cstdint>
#include <new>

#include "core/log.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

namespace {

// A per-thread memo of the last communicator looked up, because an attribute
// lookup costs ~35 ns in Open MPI 4.1 — more than the whole fall-through budget.
// A handle value can only be reused after MPI_Comm_free, and freeing any
// communicator that carries our state runs comm_state_delete, which bumps the
// epoch; so a memo whose epoch is current cannot name a recycled handle.
std::atomic<std::uint64_t> g_epoch{0};

struct Memo {
  MPI_Comm comm = MPI_COMM_NULL;
  CommState* state = nullptr;
  std::uint64_t epoch = ~std::uint64_t{0};
};
thread_local Memo t_memo __attribute__((tls_model("initial-exec")));

}  // namespace

int comm_state_delete(MPI_Comm, int, void* attr, void*) {
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
  delete static_cast<CommState*>(attr);
  return MPI_SUCCESS;
}

namespace {

void trace_team(const CommState& st, const char* how) {
  if (Runtime::instance().settings().coll_trace != config::CollTrace::Debug) return;
  const shm::NodeAlltoall* engine = st.team->node_alltoall();
  log::trace("team id=%llu np=%d nodes=%d shm=%d oversubscribed=%d cma=%d %s",
             static_cast<unsigned long long>(st.id), st.team->size(), st.caps.nodes, st.caps.shm,
             st.team->oversubscribed(), engine && engine->cma_enabled(), how);
}

}  // namespace

void derive_comm_state(MPI_Comm parent, MPI_Comm child, int keyval) {
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(parent, keyval, &attr, &found) != MPI_SUCCESS || !found) return;
  const auto* ps = static_cast<const CommState*>(attr);
  if (ps->inter || !ps->team) return;
  std::unique_ptr<Team> team = Team::derive(*ps->team, parent, child);
  if (!team) return;
  auto* state = new (std::nothrow) CommState;
  if (!state) return;
  state->id = Runtime::instance().next_comm_id();
  state->caps = team->caps();
  state->team = std::move(team);
  if (PMPI_Comm_set_attr(child, keyval, state) != MPI_SUCCESS) {
    delete state;
    return;
  }
  trace_team(*state, "derived");
}

CommState* comm_state(MPI_Comm comm, int keyval) {
  const std::uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  if (t_memo.comm == comm && t_memo.epoch == epoch) return t_memo.state;
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &attr, &found) != MPI_SUCCESS) return nullptr;
  if (found) {
    t_memo = Memo{comm, static_cast<CommState*>(attr), epoch};
    return t_memo.state;
  }
  auto* state = new (std::nothrow) CommState;
  if (!state) return nullptr;
  state->id = Runtime::instance().next_comm_id();
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
    delete state;
    return nullptr;
  }
  state->inter = inter != 0;
  // inter is the same on every rank, so either all ranks build the team here
  // or none does. Without a team the communicator runs no engine.
  if (!state->inter) {
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
  t_memo = Memo{comm, state, epoch};
  return state;
}

}  // namespace mlxa2a::core::mpi
