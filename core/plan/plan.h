// decide(): the one per-call decision of MPI_Alltoall, MPI-free. Its answer
// is a Plan: either a step to take before asking again, or how the call is
// served, as data that core/mpi/serve.h carries out.
//
// dispatch (core/mpi/dispatch.cc) computes what a call is (bytes per peer,
// the arguments' verdict) and what it knows of the communicator's team, asks
// decide(), takes the steps it asks for (look the team up, finish a derived
// team's set-up, start the team's measured selection, check sizes before a
// collective begin(), ask the measured selection, ask quiet PMPI about the
// size's class) - each changes the Query, so the sequence ends after at most
// six questions - and hands the final Plan to serve().
//
// Every input that can change the route must be equal on every rank (bytes
// per peer, the rule table, the team's agreed capabilities and engine
// properties, the class's tuning state); a rank-local verdict (its send size
// differs from its receive size) only ever sends a call to PMPI, beside the
// engine's size check where the team has one (docs/shm.md "Mixed decisions").
// Pure: no MPI, no allocation, no global state.
#pragma once

#include <cstdint>

#include "core/config/rules.h"
#include "core/route/route.h"
#include "core/selection.h"

namespace mlxa2a::core::plan {

// Where dispatch stands with the communicator's state and team.
enum class Team : std::uint8_t {
  unknown,       // not looked up yet (looking it up may be collective)
  unavailable,   // the look-up failed (an MPI error)
  inter,         // an intercommunicator: always PMPI
  none,          // an intracommunicator without a team (its set-up failed)
  pending,       // a derived team whose engine is still to be set up
  setup_failed,  // that set-up failed (alike on every rank)
  ready,         // set up; caps and the engine's properties below hold
};

// The team's measured selection (core/mpi/team_tuner.h) for this call.
enum class Tuning : std::uint8_t {
  unknown,  // not started: dispatch makes it, then asks again
  off,      // nothing to measure on this team: the fixed rules decide
  on,       // measurement decides the class's route
};

// What the measured selection answered for this call (TeamTuner::begin).
struct Measured {
  bool asked = false;
  Route route = Route::pmpi;
  const char* reason = nullptr;
  bool timed = false;  // a trial or probe: timed, its time handed back
  bool trial = false;  // counted as a trial (PathCounts::trials)
  bool fixed = false;  // the fixed rules' route (selection could not run): the reason names none
  std::uint64_t memo_until = 0;  // TeamTuner::Step::repeat_until
};

// While the team is quiet: what its selection says of the size's class
// (TeamTuner::quiet_serves).
struct QuietClass {
  bool asked = false;
  bool decided = false;  // decided pmpi: a memo may serve alike calls until `until`
  const char* reason = nullptr;
  std::uint64_t until = 0;  // quiet's next boundary
};

struct Query {
  std::uint64_t bytes = 0;     // per peer, from the receive signature
  bool sizes_differ = false;   // this rank sends another size than it receives
  const config::rules::Table* tune = nullptr;  // MLXA2A_TUNE
  bool measure = true;         // MLXA2A_TUNE_SAMPLES != 0
  Team team = Team::unknown;
  Capabilities caps;           // agreed; valid when team is ready
  bool engine = false;         // the team has an engine
  bool compares_sizes = false;  // ... which compares every rank's size per call
  bool hier = false;           // ... the hierarchical one
  bool contained = false;      // ... whose RDMA exchange failed earlier (containment)
  Route engine_route = Route::pmpi;  // the engine's own route for bytes (engine only)
  Tuning tuning = Tuning::unknown;
  // Known once the team is looked up and its selection started:
  bool quiet = false;           // the team's selection serves this call quiet (docs/tune.md)
  bool quiet_eligible = false;  // the team could become quiet (TeamTuner::quiet_eligible)
  bool check_first = false;     // begin() is collective for this size (a tune file)
  bool sizes_checked = false;   // the check before it passed
  Measured measured;
  QuietClass quiet_class;
};

enum class Serve : std::uint8_t {
  // Steps: dispatch takes one, updates the Query and asks again.
  look_up_team,  // find (or build, collectively) the communicator's state
  set_up,        // finish a derived team's set-up (collective)
  start_tuning,  // make the team's measured selection
  check_sizes,   // the engine's size check before a collective begin()
  measure,       // ask the measured selection (route: the fixed rules' choice)
  quiet_class,   // ask quiet PMPI about the size's class
  // How the call is served (core/mpi/serve.h):
  pmpi,             // PMPI_Alltoall alone judges it
  pmpi_beside,      // PMPI beside the engine's size check (a peer may be in the engine)
  check_then_pmpi,  // the size check, then PMPI alone (a pmpi trial on a team that may be quiet)
  engine,           // the team's engine by route
  contained,        // the team's containment: PMPI, or the failure another rank had
};
constexpr bool is_step(Serve s) { return s < Serve::pmpi; }

// A memo for every later alike call (CommState::Repeat).
inline constexpr std::uint64_t kMemoForever = UINT64_MAX;

struct Plan {
  Serve serve;
  Route route = Route::pmpi;  // engine (and contained from it): concrete; measure: the fixed route
  const char* reason = nullptr;  // static text for the trace (nullptr for the steps)
  const char* suffix = "";       // after the reason in the trace
  bool timed = false;  // time the call and hand the time to the measured selection
  bool trial = false;  // counted as a trial
  // pmpi_beside in a pmpi trial: the check also tells whether every rank was
  // in this trial (SizeAgreement::trial_beside_pmpi).
  bool beside_trial = false;
  // Alike calls (the same plain signature, core/mpi/serve.h) whose index is
  // below this may repeat the plan's route without deciding; 0: none.
  std::uint64_t memo_until = 0;
};

Plan decide(const Query& q) noexcept;

// How a route is served on a set-up team as it stands: an engine route on a
// contained team goes to containment; a pmpi route runs alone while quiet,
// else beside the size check where the engine compares sizes (a peer of
// another size may be in the engine). The memo's replay asks this too.
constexpr Serve form(Route route, bool quiet, bool compares_sizes, bool contained,
                     std::uint64_t bytes) {
  if (route != Route::pmpi) return contained ? Serve::contained : Serve::engine;
  if (quiet || !compares_sizes) return Serve::pmpi;
  return contained && bytes != 0 ? Serve::contained : Serve::pmpi_beside;
}

}  // namespace mlxa2a::core::plan
