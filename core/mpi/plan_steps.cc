#include "core/mpi/plan_steps.h"

#include <climits>
#include <cstdio>

#include "core/log.h"
#include "core/mpi/runtime.h"
#include "core/mpi/team_tuner.h"

namespace mlxa2a::core::mpi {

namespace {

// What the decision needs to know of the communicator's state (null: its
// look-up failed) for a call of q.bytes.
void learn(plan::Query& q, const CommState* st) {
  using plan::Team;
  if (!st) {
    q.team = Team::unavailable;
    return;
  }
  const auto& team = st->team;
  q.team = st->inter                ? Team::inter
           : !team                  ? Team::none
           : team->setup_pending()  ? Team::pending
                                    : Team::ready;
  q.caps = st->caps;
  const Engine* e = team ? team->engine() : nullptr;
  q.engine = e != nullptr;
  q.compares_sizes = team && team->compares_sizes();
  q.hier = team && team->engine_is(EngineProps::Kind::hier);
  q.contained = team && team->contained();
  q.engine_route = e ? e->default_route(q.bytes) : Route::pmpi;
  q.tuning = st->tuner       ? plan::Tuning::on
             : st->tuner_off ? plan::Tuning::off
                             : plan::Tuning::unknown;
  // Only sizes measured selection takes (size classes cover 1 B .. 2 GiB).
  q.check_first = st->tuner && q.bytes != 0 && q.bytes <= INT_MAX &&
                  st->tuner->begin_is_collective(q.bytes);
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

void measure(const plan::Plan& p, const Call& c, plan::Query& q, CommState& st) {
  const TeamTuner::Step s = st.tuner->begin(c.bytes, p.route, st.calls, c.a.comm);
  q.measured = {true, s.path, s.reason, s.timed, s.trial, s.fixed, s.repeat_until};
  // After begin(): a tune file's decision may have changed it.
  q.quiet_eligible = st.tuner->quiet_eligible();
}

}  // namespace

bool take_step(const plan::Plan& p, const Call& c, plan::Query& q, CommState*& st, int* rc) {
  Runtime& rt = Runtime::instance();
  switch (p.serve) {
    case plan::Serve::look_up_team:
      st = comm_state(c.a.comm, rt.comm_keyval());
      if (st) ++st->calls;
      learn(q, st);
      // Every call passes here or the memo's replay, so quiet's boundaries
      // fall on the same call on every rank.
      q.quiet = st && st->tuner && st->tuner->quiet(st->calls, c.a.comm, c.trace);
      return false;
    case plan::Serve::set_up:
      if (finish_setup(*st, c.a.comm, c.trace)) {
        learn(q, st);
      } else {
        q.team = plan::Team::setup_failed;
      }
      return false;
    case plan::Serve::start_tuning:
      st->tuner = TeamTuner::create(*st->team, rt.settings(), rt.world_rank());
      st->tuner_off = !st->tuner;
      learn(q, st);
      return false;
    case plan::Serve::check_sizes:
      if (check_before_measure(c, *st, rc)) return true;
      q.sizes_checked = true;
      return false;
    case plan::Serve::measure:
      measure(p, c, q, *st);
      return false;
    case plan::Serve::quiet_class: {
      const char* reason = nullptr;
      const bool decided = st->tuner->quiet_serves(c.bytes, &reason);
      q.quiet_class = {true, decided, reason, decided ? st->tuner->quiet_until() : 0};
      return false;
    }
    default:
      return false;  // not a step: decide() never asks it as one
  }
}

}  // namespace mlxa2a::core::mpi
