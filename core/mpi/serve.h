// serve(): carries out the Plan decide() answered (core/plan/plan.h) - PMPI
// alone, PMPI beside the engine's size check, the check then PMPI, the
// team's engine, or containment - untimed or as a timed trial of measured
// selection, and records the communicator's memo once when the plan allows
// it. The memo's replay (serve_repeat) serves its route as the team stands.
// Counted by the route's family (PathCounts) and traced from the plan's
// fields.
#pragma once

#include <cstdint>

#include "core/mpi/call.h"
#include "core/mpi/comm_state.h"
#include "core/plan/plan.h"

namespace mlxa2a::core::mpi {

// What serving needs of the call besides the plan.
struct Call {
  const AlltoallArgs& a;
  std::uint64_t bytes;      // per peer, from the receive signature
  std::uint64_t announced;  // to the engine's size check: bytes, or this rank's send size
  bool plain;               // plain_call(): the memo may hold it, the engine takes it as is
  bool trace;
};

// Serves c as p says (not a step). st: the communicator's state; null only
// for a pmpi plan (its look-up failed or never happened).
int serve(const Call& c, CommState* st, const plan::Plan& p);

// A call alike the memo (CommState::Repeat; counted in st.calls already).
int serve_repeat(const AlltoallArgs& a, CommState& st, bool trace);

// The size check before a collective begin() of measured selection
// (plan::Serve::check_sizes). true: the check served the call (sizes
// differ, or a rank went to PMPI, which this rank then joined; both resync),
// counted and traced, *rc its result.
bool check_before_measure(const Call& c, CommState& st, int* rc);

// PMPI serves the call: counted, traced with reason when asked. st may be null.
int fall_through(const AlltoallArgs& a, bool trace, std::uint64_t bytes, const CommState* st,
                 const char* reason, const char* suffix = "");

}  // namespace mlxa2a::core::mpi
