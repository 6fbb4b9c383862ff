// decide(): the one per-call decision of MPI_Alltoall, MPI-free.
//
// dispatch (core/mpi/dispatch.cc) computes what a call is (bytes per peer,
// the arguments' verdict) and what it knows of the communicator's team, asks
// decide(), and does what the answer says. Some answers are a step dispatch
// takes before it asks again (look the team up, finish a derived team's
// set-up, start the team's measured selection): each changes the Query, so
// the sequence ends after at most four questions.
//
// Every input that can change the route must be equal on every rank (bytes
// per peer, the tune table, the team's agreed capabilities and engine
// properties, the class's tuning state); a rank-local verdict (its send size
// differs from its receive size) only ever sends a call to PMPI, beside the
// engine's size check where the team has one (docs/shm.md "Mixed decisions").
// Pure: no MPI, no allocation, no global state.
#pragma once

#include <cstdint>

#include "core/config/rules.h"
#include "core/route/route.h"
#include "core/selection.h"

namespace mlxa2a::core::route {

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
  on,       // measurement decides the class's route (Next::tune)
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
  Route engine_route = Route::pmpi;  // the engine's own route for bytes (engine only)
  Tuning tuning = Tuning::unknown;
};

enum class Next : std::uint8_t {
  run,           // serve the call by route (pmpi, or an engine route)
  pmpi_beside,   // PMPI beside the engine's size check (route pmpi)
  look_up_team,  // find (or build, collectively) the communicator's state, ask again
  set_up,        // finish a derived team's set-up (collective), ask again
  start_tuning,  // make the team's measured selection, ask again
  tune,          // measured selection serves it; route: the fixed rules' choice
};

struct Answer {
  Next next;
  Route route;         // concrete when next is run or tune
  const char* reason;  // static text for the trace (nullptr for the steps)
};

Answer decide(const Query& q) noexcept;

// Whether MLXA2A_TUNE sends every size to PMPI: then no size is needed and
// no team is built (a fast path dispatch may take before computing bytes).
inline bool pmpi_for_every_size(const config::rules::Table& t) {
  return t.uniform() && t.lookup(0) == Route::pmpi;
}

}  // namespace mlxa2a::core::route
