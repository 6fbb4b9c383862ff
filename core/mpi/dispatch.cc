#include "core/mpi/dispatch.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/log.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/job_stats.h"
#include "core/mpi/runtime.h"
#include "core/mpi/engine_call.h"
#include "core/mpi/stacking.h"
#include "core/mpi/team_tuner.h"
#include "core/route/decide.h"

namespace mlxa2a::core::mpi {

namespace {

using detail::t_counts;

std::string comm_label(MPI_Comm comm) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int len = 0;
  if (PMPI_Comm_get_name(comm, name, &len) == MPI_SUCCESS && len > 0) return name;
  char id[24];
  std::snprintf(id, sizeof id, "comm#%x", static_cast<unsigned>(PMPI_Comm_c2f(comm)));
  return id;
}

// path=: the route's family, by the names MLXA2A_TUNE accepts (pmpi, shm, rdma).
void trace_call(const AlltoallArgs& a, std::uint64_t bytes, const CommState* st, Route route,
                const char* reason, const char* suffix = "") {
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

// Falls through to PMPI, tracing why when asked.
int fall_through(const AlltoallArgs& a, bool trace, std::uint64_t bytes, const CommState* st,
                 const char* reason, const char* suffix = "") {
  ++t_counts.pmpi;
  if (trace) trace_call(a, bytes, st, Route::pmpi, reason, suffix);
  return pmpi_alltoall(a);
}

// A team derived at MPI_Comm_split/dup sets its engine up (from the pool or
// a new segment) at the first call that may use it - the same call on every
// rank (collective). The set-up agrees on the team's capabilities (RDMA may
// have turned out unavailable), which st.caps then follow. false: it failed
// (alike on every rank).
bool finish_setup(CommState& st, MPI_Comm comm, bool trace) {
  Runtime& rt = Runtime::instance();
  const bool ok = st.team->complete_setup(comm, rt.settings());
  st.caps = st.team->caps();
  if (ok && trace && st.team->engine() && !st.team->engine_is(EngineProps::Kind::local)) {
    // A multi-node engine's staging slot (its team line came before it).
    const EngineProps* p = st.team->engine_props();
    char slot[32] = "";
    if (p && p->kind == EngineProps::Kind::hier) {
      std::snprintf(slot, sizeof slot, " slot=%zu", p->stage_bytes);
    }
    log::trace("team id=%llu engine: %s%s", static_cast<unsigned long long>(st.id),
               st.team->reused_engine() ? "reused" : "new", slot);
  }
  return ok;
}

int contained_call(const AlltoallArgs& a, CommState& st, std::uint64_t bytes, bool trace);

// A PMPI route on a set-up team whose engine compares sizes (docs/shm.md
// "Mixed decisions"): the call runs beside the engine's check, so that a
// peer of another size in the engine is not left waiting. On a contained
// team, as the engine routes (the same outcome per call on every rank).
// trial: a pmpi trial, which learns whether the call matched everywhere
// (engine_beside_pmpi: a resync when not).
int checked_pmpi(const AlltoallArgs& a, CommState& st, bool trace, std::uint64_t bytes,
                 std::uint64_t announced, const char* reason, bool trial = false) {
  if (st.team->contained() && bytes != 0) return contained_call(a, st, bytes, trace);
  struct Serve {
    const AlltoallArgs& a;
    bool trace;
    std::uint64_t bytes;
    const CommState* st;
    const char* reason;
    const char* suffix;
  } serve{a, trace, bytes, &st, reason, trial ? "; the check beside PMPI timed" : ""};
  auto call = [](void* p) {
    const Serve& s = *static_cast<const Serve*>(p);
    return fall_through(s.a, s.trace, s.bytes, s.st, s.reason, s.suffix);
  };
  bool served = false;
  const int rc = engine_beside_pmpi(a, *st.team, announced, call, &serve, &served, trial);
  if (!served) {
    ++t_counts.shm;
    if (trace) trace_call(a, bytes, &st, Route::shm, "size check before pmpi failed");
  }
  return rc;
}

// Checks what can be checked without an MPI call; see the header's contract.
const char* invalid_argument(const AlltoallArgs& a) {
  if (a.comm == MPI_COMM_NULL) return "invalid argument (MPI_COMM_NULL): PMPI reports it";
  if (a.recvtype == MPI_DATATYPE_NULL || a.recvcount < 0) {
    return "invalid argument (receive count or type): PMPI reports it";
  }
  if (a.sendbuf != MPI_IN_PLACE && (a.sendtype == MPI_DATATYPE_NULL || a.sendcount < 0)) {
    return "invalid argument (send count or type): PMPI reports it";
  }
  // MPI_IN_PLACE is a sentinel address (not null in either MPI): as the
  // receive buffer it is erroneous, and the engine would write through it.
  if (a.recvbuf == MPI_IN_PLACE) {
    return "invalid argument (MPI_IN_PLACE as receive buffer): PMPI reports it";
  }
  // Send and receive buffers must not alias (MPI 4.0 section 2.3); MPICH
  // reports it, and the engine assumes distinct buffers. Only with equal
  // signatures, as MPICH checks: MPI_BOTTOM in both places with different
  // absolute-address types is correct.
  if (a.sendbuf == a.recvbuf && a.sendtype == a.recvtype && a.sendcount == a.recvcount &&
      a.recvcount != 0) {
    return "invalid argument (send buffer is the receive buffer): PMPI judges it";
  }
  return nullptr;
}

// Whether this rank's send signature carries as many bytes per peer as its
// receive signature (bytes). A mismatch is erroneous (MPI 4.0 section 6.9:
// the type signatures must match); the MPI reports it as it sees fit (Open
// MPI checks it locally, MPICH finds the truncation), so PMPI judges. Rank-
// local: every rank whose arguments are alike takes the same decision.
// *send_bytes, written only when they differ: the send size per peer when
// known, else bytes + 1 (a value no correct peer announces). A match leaves
// it alone: it is what this rank announces to the engine's size check (a
// rank whose send type differs from its receive type with the same size
// announced bytes + 1 and made a correct call fail with MPI_ERR_TRUNCATE).
bool sizes_match(const AlltoallArgs& a, std::uint64_t bytes, std::uint64_t* send_bytes) {
  if (a.sendbuf == MPI_IN_PLACE) return true;
  if (a.sendtype == a.recvtype && a.sendcount == a.recvcount) return true;
  MPI_Count type_size = static_cast<MPI_Count>(predefined_scalar_size(a.sendtype));
  std::uint64_t sent = 0;
  if ((type_size == 0 &&
       (PMPI_Type_size_x(a.sendtype, &type_size) != MPI_SUCCESS || type_size < 0)) ||
      __builtin_mul_overflow(static_cast<std::uint64_t>(a.sendcount),
                             static_cast<std::uint64_t>(type_size), &sent)) {
    *send_bytes = bytes + 1;
    return false;
  }
  if (sent == bytes) return true;
  *send_bytes = sent;
  return false;
}

// Whether a has the signature recorded in r (see CommState::Repeat). Only
// named (predefined) types are recorded: they are never freed, so a handle
// cannot come back naming another type.
bool repeats(const CommState::Repeat& r, const AlltoallArgs& a) {
  return r.bytes != 0 && (r.calls == nullptr || *r.calls + 1 < r.until) &&
         a.sendtype == r.sendtype && a.recvtype == r.recvtype &&
         a.sendcount == r.sendcount && a.recvcount == r.recvcount && a.sendbuf != MPI_IN_PLACE &&
         a.recvbuf != MPI_IN_PLACE && a.sendbuf != a.recvbuf;
}

// Contiguous buffers of plain named types: the engine takes them as they are,
// and a later call with the same signature may repeat the decision.
bool plain_call(const AlltoallArgs& a, std::uint64_t bytes) {
  return bytes != 0 && a.sendbuf != MPI_IN_PLACE && is_plain_named(a.recvtype) &&
         (a.sendtype == a.recvtype || is_plain_named(a.sendtype));
}

// A call routed to the engine of a team whose RDMA exchange failed earlier
// (core/mpi/containment.h): PMPI, or at once MPI_ERR_OTHER for a call some
// other rank failed, so that every rank's first PMPI call is the same call.
int contained_call(const AlltoallArgs& a, CommState& st, std::uint64_t bytes, bool trace) {
  if (bytes == 0) return MPI_SUCCESS;  // as the engine: no peer takes part
  Engine& engine = *st.team->engine();  // contained(): there is one
  if (engine.contained_call(bytes)) {
    return fall_through(a, trace, bytes, &st, engine.contained_why().c_str());
  }
  ++t_counts.pmpi;
  if (trace) {
    trace_call(a, bytes, &st, Route::pmpi,
               "RDMA containment: another rank failed this call, so it fails here too");
  }
  MLXA2A_LOG(Error, "%s fails: another rank's RDMA exchange failed this call", a.entry);
  PMPI_Comm_call_errhandler(a.comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

// A call of a quiet team (TeamTuner::quiet, docs/tune.md "Quiet PMPI"):
// every rank's call of any size goes to PMPI_Alltoall, which judges it; no
// check call. A size class not yet decided is held there (not measured) until
// a boundary agreement ends quiet on every rank.
int quiet_call(const AlltoallArgs& a, CommState& st, std::uint64_t bytes, bool sizes_differ,
               bool trace) {
  const char* reason = "invalid argument (send and receive sizes differ): PMPI judges it";
  if (!sizes_differ) {
    if (Runtime::instance().settings().tune.lookup(bytes) == Route::pmpi) {
      reason = "MLXA2A_TUNE selects pmpi for this size";
    } else if (bytes > INT_MAX) {
      reason = "bytes per peer above 2 GiB: PMPI";
    } else if (st.tuner->quiet_serves(bytes, &reason) && plain_call(a, bytes)) {
      // A decided pmpi class: later calls alike take the repeat path up to
      // quiet's next boundary, which every rank's call then meets here: if
      // quiet ends, the class's selection (probes) resumes alike on every
      // rank instead of a memo that would outlive quiet.
      st.repeat = {a.sendtype, a.recvtype, a.sendcount, a.recvcount, bytes, reason, Route::pmpi};
      st.repeat.calls = &st.calls;
      st.repeat.until = st.tuner->quiet_until();
    }
  }
  return fall_through(a, trace, bytes, &st, reason);
}

// Serves a call by route: pmpi, or an engine route. plain: plain_call(a,
// bytes). A pmpi route (measured, or replayed) on a team whose engine
// compares sizes checks them first: a peer of another size may be in the
// engine (its size class took another route), where it would wait for this
// rank forever.
int run_route(const AlltoallArgs& a, CommState& st, std::uint64_t bytes, Route route,
              bool trace, const char* reason, bool plain = true) {
  if (route == Route::pmpi) {
    // Quiet (docs/tune.md "Quiet PMPI"): no rank of this call can be in the
    // engine, so PMPI alone serves and judges it, as without mlxa2a.
    if (st.tuner && st.tuner->quiet(st.calls, a.comm, trace)) {
      return fall_through(a, trace, bytes, &st, reason);
    }
    if (st.team->compares_sizes()) return checked_pmpi(a, st, trace, bytes, bytes, reason);
    return fall_through(a, trace, bytes, &st, reason);
  }
  if (st.team->contained()) return contained_call(a, st, bytes, trace);
  // Counted and traced by family: rdma for rdma and zcopy (zcopy with the
  // word "zcopy" after the reason), shm for every other engine route.
  ++(route == Route::rdma || route == Route::zcopy ? t_counts.rdma : t_counts.shm);
  if (trace) {
    const bool named = std::strstr(reason, "zcopy") != nullptr;  // "tuned: zcopy", ...
    trace_call(a, bytes, &st, route, reason, route == Route::zcopy && !named ? " zcopy" : "");
  }
  return plain ? engine_alltoall_contiguous(a, *st.team, bytes, route)
               : engine_alltoall(a, *st.team, bytes, route);
}

// A call of a size class that measured selection decides (core/mpi/team_tuner.h):
// `first` is the fixed rules' route, tried first. Every rank comes here at
// the same call.
int tuned_call(const AlltoallArgs& a, CommState& st, std::uint64_t bytes, Route first,
               bool trace) {
  // A peer of another size (an erroneous program) is in another size class,
  // whose tuning state may differ: this call must change no class's state
  // on any rank. The engine or the size check finds it on every rank (the
  // team resyncs); begin()'s agreement over the tune file is checked first.
  const std::uint64_t resyncs = st.team->resyncs();
  if (st.tuner->begin_is_collective(bytes) && st.team->compares_sizes()) {
    // Served already when sizes differ or (multi-node) a rank went to PMPI,
    // which this rank then joined (r is PMPI's result); both resync.
    if (const int r = engine_check_sizes(a, *st.team, bytes);
        r != MPI_SUCCESS || st.team->resyncs() != resyncs) {
      ++t_counts.shm;
      if (trace) trace_call(a, bytes, &st, Route::shm, "size check before tuning failed");
      return r;
    }
  }
  const TeamTuner::Step step = st.tuner->begin(bytes, first, st.calls, a.comm);
  const bool plain = plain_call(a, bytes);
  if (!step.timed) {
    if (plain && step.repeat_until != 0) {
      st.repeat = {a.sendtype, a.recvtype, a.sendcount, a.recvcount, bytes, step.reason, step.path};
      st.repeat.calls = &st.calls;
      st.repeat.until = step.repeat_until;
    }
    return run_route(a, st, bytes, step.path, trace, step.reason, plain);
  }
  t_counts.trials += step.trial;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  double took = 0;
  int rc = MPI_SUCCESS;
  const bool hier_pmpi = step.path == Route::pmpi && st.team->engine_is(EngineProps::Kind::hier);
  if (hier_pmpi && !st.tuner->quiet_eligible()) {
    // A multi-node team that cannot become quiet (a class decided for an
    // engine, an engine rule): its routed pmpi calls will pay the check
    // beside PMPI, so the trial times that form; the check round tells
    // afterwards whether the call matched everywhere (docs/tune.md, "What a
    // pmpi trial times").
    rc = checked_pmpi(a, st, trace, bytes, bytes, step.reason, true);
    took = std::chrono::duration<double>(Clock::now() - t0).count();
  } else if (hier_pmpi) {
    // A team that may become quiet (no check at all then): a pmpi trial
    // checks sizes before PMPI, as the single-node engine does in
    // run_route, outside the timing - the check beside PMPI tells engine
    // peers, not this rank, and a mismatched call must record no trial
    // anywhere (docs/tune.md).
    rc = engine_check_sizes(a, *st.team, bytes);
    if (rc == MPI_SUCCESS && st.team->resyncs() == resyncs) {
      const auto t1 = Clock::now();
      rc = fall_through(a, trace, bytes, &st, step.reason);
      took = std::chrono::duration<double>(Clock::now() - t1).count();
    } else {
      // A failed check (not a mismatch: that returns below) counts whole.
      ++t_counts.shm;
      if (trace) trace_call(a, bytes, &st, Route::shm, "size check before pmpi failed");
      took = std::chrono::duration<double>(Clock::now() - t0).count();
    }
  } else {
    rc = run_route(a, st, bytes, step.path, trace, step.reason, plain);
    took = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (st.team->resyncs() != resyncs) return rc;  // a mismatch: no trial recorded anywhere
  if (const double agreed = st.tuner->finish_trial(bytes, took, a.comm); agreed >= 0) {
    ++t_counts.agreements;
    t_counts.agreement_seconds += agreed;
  }
  return rc;
}

// What the decision needs to know of the communicator's state (null: its
// look-up failed) for a call of q.bytes.
void learn(route::Query& q, const CommState* st) {
  using route::Team;
  if (!st) {
    q.team = Team::unavailable;
    return;
  }
  const auto& team = st->team;
  q.team = st->inter                ? route::Team::inter
           : !team                  ? route::Team::none
           : team->setup_pending()  ? route::Team::pending
                                    : route::Team::ready;
  q.caps = st->caps;
  const Engine* e = team ? team->engine() : nullptr;
  q.engine = e != nullptr;
  q.compares_sizes = team && team->compares_sizes();
  q.engine_route = e ? e->default_route(q.bytes) : Route::pmpi;
  q.tuning = st->tuner ? route::Tuning::on : st->tuner_off ? route::Tuning::off
                                                              : route::Tuning::unknown;
}

// The receive signature's bytes per peer into *bytes; why PMPI decides
// instead when it cannot be known.
const char* receive_bytes(const AlltoallArgs& a, std::uint64_t* bytes) {
  MPI_Count type_size = static_cast<MPI_Count>(predefined_scalar_size(a.recvtype));
  if (type_size == 0 &&
      (PMPI_Type_size_x(a.recvtype, &type_size) != MPI_SUCCESS || type_size < 0)) {
    return "receive type size unknown: PMPI decides";
  }
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(a.recvcount),
                             static_cast<std::uint64_t>(type_size), bytes)) {
    return "invalid argument (receive size overflows): PMPI judges it";
  }
  return nullptr;
}

// Computes what the call is, asks core/route/decide.h, takes the steps it
// asks for (each collective alike on every rank) and serves the answer.
int decide_and_run(const AlltoallArgs& a, std::uint64_t bytes, bool trace) {
  Runtime& rt = Runtime::instance();
  route::Query q;
  q.bytes = bytes;
  q.tune = &rt.settings().tune;
  q.measure = rt.settings().tune_samples != 0;
  // A peer whose arguments are right is in the engine with its receive size:
  // this rank announces what it sends, so that it differs.
  std::uint64_t announced = bytes;
  q.sizes_differ = !sizes_match(a, bytes, &announced);
  CommState* st = nullptr;
  for (;;) {
    const route::Answer ans = route::decide(q);
    switch (ans.next) {
      case route::Next::look_up_team:
        st = comm_state(a.comm, rt.comm_keyval());
        if (st) ++st->calls;
        learn(q, st);
        // Every call passes here or the repeat's run_route, so quiet's
        // boundaries fall on the same call on every rank. A 0-byte call
        // goes on: it returns at once on a multi-node team.
        if (st && st->tuner && st->tuner->quiet(st->calls, a.comm, trace) && bytes != 0) {
          return quiet_call(a, *st, bytes, q.sizes_differ, trace);
        }
        break;
      case route::Next::set_up:
        if (!finish_setup(*st, a.comm, trace)) {
          q.team = route::Team::setup_failed;
        } else {
          learn(q, st);
        }
        break;
      case route::Next::start_tuning:
        st->tuner = TeamTuner::create(*st->team, rt.settings(), rt.world_rank());
        st->tuner_off = !st->tuner;
        learn(q, st);
        break;
      case route::Next::tune:
        return tuned_call(a, *st, bytes, ans.route, trace);
      case route::Next::pmpi_beside:
        return checked_pmpi(a, *st, trace, bytes, announced, ans.reason);
      case route::Next::run:
        if (ans.route == Route::pmpi) return fall_through(a, trace, bytes, st, ans.reason);
        if (plain_call(a, bytes)) {
          st->repeat = {a.sendtype, a.recvtype, a.sendcount, a.recvcount, bytes, ans.reason,
                        ans.route};
          return run_route(a, *st, bytes, ans.route, trace, ans.reason, true);
        }
        return run_route(a, *st, bytes, ans.route, trace, ans.reason, false);
    }
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
  if (!trace && route::pmpi_for_every_size(rt.settings().tune)) {
    return fall_through(a, false, 0, nullptr, "MLXA2A_TUNE selects pmpi for this size");
  }
  // Every rank computes the same size from its receive signature, so a type
  // whose size is unknown sends every rank to PMPI alike.
  std::uint64_t bytes = 0;
  if (const char* why = receive_bytes(a, &bytes)) return fall_through(a, trace, 0, nullptr, why);
  return decide_and_run(a, bytes, trace);
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
      return run_route(a, *st, st->repeat.bytes, st->repeat.route, rt.trace(), st->repeat.reason);
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

int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) noexcept {
  const int rc = mpi_own().comm_split(comm, color, key, newcomm);
  if (ReentryGuard::nested()) return rc;
  ReentryGuard guard;
  Runtime& rt = Runtime::instance();
  if (rc == MPI_SUCCESS && rt.state() == State::Active && *newcomm != MPI_COMM_NULL) {
    try {
      derive_comm_state(comm, *newcomm, rt.comm_keyval());
    } catch (...) {
    }
  }
  if (rc == MPI_SUCCESS && rt.state() != State::Uninitialised && rt.trace()) {
    try {
      const bool undefined = *newcomm == MPI_COMM_NULL;
      int size = 0;
      if (!undefined) PMPI_Comm_size(*newcomm, &size);
      log::trace("MPI_Comm_split parent=%s color=%d key=%d result=%s np=%d", comm_label(comm).c_str(),
                 color, key, undefined ? "MPI_COMM_NULL" : comm_label(*newcomm).c_str(), size);
    } catch (...) {
    }
  }
  return rc;
}

void after_init(int rc) noexcept {
  if (rc != MPI_SUCCESS) return;
  ReentryGuard guard;
  try {
    Runtime::instance().after_init();
  } catch (...) {
    MLXA2A_LOG(Error, "internal error during initialisation");
  }
}

int init(int* argc, char*** argv) noexcept {
  require_mpi_own();
  const int rc = mpi_own().init(argc, argv);
  after_init(rc);
  return rc;
}

int init_thread(int* argc, char*** argv, int required, int* provided) noexcept {
  require_mpi_own();
  const int rc = mpi_own().init_thread(argc, argv, required, provided);
  after_init(rc);
  return rc;
}

int finalize() noexcept {
  // Clean-up runs from the MPI_COMM_SELF delete callback inside PMPI_Finalize, so
  // Fortran programs (whose MPI_FINALIZE calls PMPI_Finalize directly) get it too.
  return PMPI_Finalize();
}

}  // namespace mlxa2a::core::mpi
