#include "core/mpi/dispatch.h"

#include <cstdint>

#include "core/config/rules.h"
#include "core/log.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/job_stats.h"
#include "core/mpi/plan_steps.h"
#include "core/mpi/runtime.h"
#include "core/mpi/serve.h"
#include "core/plan/plan.h"

namespace mlxa2a::core::mpi {

namespace {

// Whether a has the signature recorded in r (see CommState::Repeat). Only
// named (predefined) types are recorded: they are never freed, so a handle
// cannot come back naming another type.
bool repeats(const CommState::Repeat& r, const AlltoallArgs& a) {
  return r.bytes != 0 && (r.calls == nullptr || *r.calls + 1 < r.until) &&
         a.sendtype == r.sendtype && a.recvtype == r.recvtype &&
         a.sendcount == r.sendcount && a.recvcount == r.recvcount && a.sendbuf != MPI_IN_PLACE &&
         a.recvbuf != MPI_IN_PLACE && a.sendbuf != a.recvbuf;
}

// Asks core/plan/plan.h how the call is served, takes the steps it asks for
// (each collective alike on every rank; core/mpi/plan_steps.h) and serves
// the plan (core/mpi/serve.h).
int decide_and_serve(const AlltoallArgs& a, std::uint64_t bytes, bool trace) {
  const Runtime& rt = Runtime::instance();
  plan::Query q;
  q.bytes = bytes;
  q.tune = &rt.settings().tune;
  q.measure = rt.settings().tune_samples != 0;
  // A peer whose arguments are right is in the engine with its receive size:
  // this rank announces what it sends, so that it differs.
  std::uint64_t announced = bytes;
  q.sizes_differ = !sizes_match(a, bytes, &announced);
  const Call c{a, bytes, announced, plain_call(a, bytes), trace};
  CommState* st = nullptr;
  for (;;) {
    const plan::Plan p = plan::decide(q);
    if (!plan::is_step(p.serve)) return serve(c, st, p);
    if (int rc = MPI_SUCCESS; take_step(p, c, q, st, &rc)) return rc;
  }
}

// Every call but a repeat (alltoall_impl). Out of line, so that the repeat
// path keeps a small frame (callgrind, np=2 1 B: 86 -> 74 instructions).
[[gnu::noinline]] int first_call(const AlltoallArgs& a) {
  Runtime& rt = Runtime::instance();
  State state = rt.state();
  if (state == State::Uninitialised) state = rt.lazy_init();
  if (state == State::Uninitialised) {
    // Before MPI_Init: a program of MPI 4 sessions, or an erroneous call PMPI
    // reports. mlxa2a has not started, so the call is neither traced (that
    // asks the MPI about the communicator) nor counted (the stats lines and
    // the trace must agree).
    return pmpi_alltoall(a);
  }
  if (state != State::Active) {
    return fall_through(a, rt.trace(), 0, nullptr,
                        state == State::Finalised ? "after MPI_Finalize"
                                                  : rt.inactive_reason().c_str());
  }
  const bool trace = rt.trace();
  if (const char* why = invalid_argument(a)) return fall_through(a, trace, 0, nullptr, why);
  // The size per peer decides the route, so every call computes it, traced
  // or not: a decision must never depend on whether it is traced. Only a
  // table that sends every size to PMPI decides without it (the trace still
  // wants it, but that changes no decision).
  if (!trace && config::rules::pmpi_for_every_size(rt.settings().tune)) {
    return fall_through(a, false, 0, nullptr, "MLXA2A_TUNE selects pmpi for this size");
  }
  // Every rank computes the same size from its receive signature, so a type
  // whose size is unknown sends every rank to PMPI alike.
  std::uint64_t bytes = 0;
  if (const char* why = receive_bytes(a, &bytes)) return fall_through(a, trace, 0, nullptr, why);
  return decide_and_serve(a, bytes, trace);
}

int alltoall_impl(const AlltoallArgs& a) {
  // A repeat of the last decided call on this communicator (a loop): same
  // types and counts, so the same size, class and route on every rank (an
  // engine by the fixed rules, or a measured decision, which is final),
  // traced with the reason given then. Only an active runtime memoises.
  const Runtime& rt = Runtime::instance();
  if (rt.state() == State::Active) [[likely]] {
    if (CommState* st = memoised_comm_state(a.comm); st && repeats(st->repeat, a)) {
      ++st->calls;
      return serve_repeat(a, *st, rt.trace());
    }
  }
  return first_call(a);
}

}  // namespace

// Out of line: the nested and pass-through calls (alltoall(), dispatch.h)
// keep a small frame and no unwinding state.
int detail::dispatch_alltoall(const AlltoallArgs& a) noexcept {
  ReentryGuard guard;
  try {
    const job_stats::CallTimer timer(a);  // MLXA2A_COLL_STATS=json
    return alltoall_impl(a);
  } catch (...) {
    // Nothing has been handed to an engine when an exception escapes the
    // selection steps, so PMPI can still serve the call.
    MLXA2A_LOG(Error, "internal error in %s; passing the call to PMPI", a.entry);
    return pmpi_alltoall(a);
  }
}

}  // namespace mlxa2a::core::mpi
