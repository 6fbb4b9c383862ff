#include "core/mpi/serve.h"

#include <chrono>
#include <string>

#include "core/log.h"
#include "core/mpi/engine_call.h"
#include "core/mpi/team_tuner.h"

namespace mlxa2a::core::mpi {

namespace {

using detail::t_counts;
using plan::Serve;
using Clock = std::chrono::steady_clock;

// path=: the route's family, by the names MLXA2A_TUNE accepts (pmpi, shm, rdma).
void trace_call(const AlltoallArgs& a, std::uint64_t bytes, const CommState* st, Route route,
                const char* reason, const char* suffix) {
  const std::string_view path = to_string(family(route));
  int size = -1, rank = -1;
  if (a.comm != MPI_COMM_NULL) {
    PMPI_Comm_size(a.comm, &size);
    PMPI_Comm_rank(a.comm, &rank);
  }
  log::trace("%s comm=%s%s np=%d rank=%d bytes_per_peer=%llu in_place=%d path=%.*s reason=%s%s",
             a.entry, a.comm == MPI_COMM_NULL ? "MPI_COMM_NULL" : comm_label(a.comm).c_str(),
             st ? (" id=" + std::to_string(st->id) + " call=" + std::to_string(st->calls)).c_str()
                : "",
             size, rank, static_cast<unsigned long long>(bytes), a.sendbuf == MPI_IN_PLACE,
             static_cast<int>(path.size()), path.data(), reason, suffix);
}

// A call the engine's size check served instead of its route.
int served_by_check(const Call& c, CommState& st, int rc, const char* reason) {
  ++t_counts.shm;
  if (c.trace) trace_call(c.a, c.bytes, &st, Route::shm, reason, "");
  return rc;
}

// The team's engine by route, counted by the route's family.
int engine(const Call& c, CommState& st, Route route, const char* reason, const char* suffix) {
  ++(family(route) == Route::rdma ? t_counts.rdma : t_counts.shm);
  if (c.trace) trace_call(c.a, c.bytes, &st, route, reason, suffix);
  return c.plain ? engine_alltoall_contiguous(c.a, *st.team, c.bytes, route)
                 : engine_alltoall(c.a, *st.team, c.bytes, route);
}

// A team whose RDMA exchange failed earlier (core/mpi/containment.h): PMPI,
// or at once MPI_ERR_OTHER for a call some other rank failed, so that every
// rank's first PMPI call is the same call.
int contained(const Call& c, CommState& st) {
  if (c.bytes == 0) return MPI_SUCCESS;  // as the engine: no peer takes part
  EngineContainment& e = *st.team->containment();  // contained(): there is one
  if (e.contained_call(c.bytes)) {
    return fall_through(c.a, c.trace, c.bytes, &st, e.contained_why().c_str());
  }
  ++t_counts.pmpi;
  if (c.trace) {
    trace_call(c.a, c.bytes, &st, Route::pmpi,
               "RDMA containment: another rank failed this call, so it fails here too", "");
  }
  MLXA2A_LOG(Error, "%s fails: another rank's RDMA exchange failed this call", c.a.entry);
  PMPI_Comm_call_errhandler(c.a.comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

// PMPI beside the engine's size check (docs/shm.md "Mixed decisions"), so
// that a peer of another size in the engine is not left waiting.
int beside(const Call& c, CommState& st, const plan::Plan& p) {
  struct Ctx {
    const Call& c;
    const CommState* st;
    const plan::Plan& p;
  } ctx{c, &st, p};
  auto call = [](void* v) {
    const Ctx& x = *static_cast<const Ctx*>(v);
    return fall_through(x.c.a, x.c.trace, x.c.bytes, x.st, x.p.reason, x.p.suffix);
  };
  bool served = false;
  const int rc =
      engine_beside_pmpi(c.a, *st.team, c.announced, call, &ctx, &served, p.beside_trial);
  return served ? rc : served_by_check(c, st, rc, "size check before pmpi failed");
}

// The size check, then PMPI alone; *t0 moves to PMPI's start (a trial times
// PMPI only: the check tells engine peers, not this rank).
int check_then_pmpi(const Call& c, CommState& st, const plan::Plan& p, Clock::time_point* t0) {
  const std::uint64_t resyncs = st.team->resyncs();
  const int rc = engine_check_sizes(c.a, *st.team, c.bytes);
  if (rc != MPI_SUCCESS || st.team->resyncs() != resyncs) {
    return served_by_check(c, st, rc, "size check before pmpi failed");
  }
  *t0 = Clock::now();
  return fall_through(c.a, c.trace, c.bytes, &st, p.reason);
}

int serve_form(const Call& c, CommState* st, const plan::Plan& p, Clock::time_point* t0) {
  switch (p.serve) {
    case Serve::engine: return engine(c, *st, p.route, p.reason, p.suffix);
    case Serve::contained: return contained(c, *st);
    case Serve::pmpi_beside: return beside(c, *st, p);
    case Serve::check_then_pmpi: return check_then_pmpi(c, *st, p, t0);
    default: return fall_through(c.a, c.trace, c.bytes, st, p.reason, p.suffix);
  }
}

// A trial or probe of measured selection: its time goes to the team's
// tuner, unless the call turned out mismatched (the team resynced): then no
// rank records it.
int timed(const Call& c, CommState& st, const plan::Plan& p) {
  t_counts.trials += p.trial;
  const std::uint64_t resyncs = st.team->resyncs();
  Clock::time_point t0 = Clock::now();
  const int rc = serve_form(c, &st, p, &t0);
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  if (st.team->resyncs() != resyncs) return rc;
  if (const double agreed = st.tuner->finish_trial(c.bytes, took, c.a.comm); agreed >= 0) {
    ++t_counts.agreements;
    t_counts.agreement_seconds += agreed;
  }
  return rc;
}

}  // namespace

int fall_through(const AlltoallArgs& a, bool trace, std::uint64_t bytes, const CommState* st,
                 const char* reason, const char* suffix) {
  ++t_counts.pmpi;
  if (trace) trace_call(a, bytes, st, Route::pmpi, reason, suffix);
  return pmpi_alltoall(a);
}

int serve(const Call& c, CommState* st, const plan::Plan& p) {
  if (p.memo_until != 0 && c.plain) {
    st->repeat = {c.a.sendtype, c.a.recvtype, c.a.sendcount, c.a.recvcount, c.bytes,
                  p.reason,     p.route,      p.suffix};
    if (p.memo_until != plan::kMemoForever) {
      st->repeat.calls = &st->calls;
      st->repeat.until = p.memo_until;
    }
  }
  if (p.timed) return timed(c, *st, p);
  Clock::time_point unused;
  return serve_form(c, st, p, &unused);
}

int serve_repeat(const AlltoallArgs& a, CommState& st, bool trace) {
  const CommState::Repeat& r = st.repeat;
  const Call c{a, r.bytes, r.bytes, true, trace};
  Team& team = *st.team;
  if (r.route != Route::pmpi) [[likely]] {
    if (team.contained()) [[unlikely]] return contained(c, st);
    return engine(c, st, r.route, r.reason, r.suffix);
  }
  // Every repeat passes quiet's boundaries as a decided call would.
  const bool quiet = st.tuner && st.tuner->quiet(st.calls, a.comm, trace);
  const plan::Plan p{plan::form(Route::pmpi, quiet, team.compares_sizes(), team.contained(),
                                r.bytes),
                     Route::pmpi, r.reason, r.suffix};
  Clock::time_point unused;
  return serve_form(c, &st, p, &unused);
}

bool check_before_measure(const Call& c, CommState& st, int* rc) {
  const std::uint64_t resyncs = st.team->resyncs();
  *rc = engine_check_sizes(c.a, *st.team, c.bytes);
  if (*rc == MPI_SUCCESS && st.team->resyncs() == resyncs) return false;
  served_by_check(c, st, *rc, "size check before tuning failed");
  return true;
}

}  // namespace mlxa2a::core::mpi
