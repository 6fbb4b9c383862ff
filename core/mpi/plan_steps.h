// The steps decide() asks for before it answers how a call is served
// (core/plan/plan.h, plan::Serve's steps): look the communicator's state up,
// finish a derived team's set-up, start its measured selection, check sizes
// before a collective begin(), ask the selection, ask quiet PMPI about the
// size's class. Each is collective alike on every rank where it is
// collective at all, and updates the Query for the next question.
#pragma once

#include "core/mpi/comm_state.h"
#include "core/mpi/serve.h"
#include "core/plan/plan.h"

namespace mlxa2a::core::mpi {

// Takes step p for call c; *st: the communicator's state once looked up.
// true when the step itself served the call (a failed size check), *rc its
// result.
bool take_step(const plan::Plan& p, const Call& c, plan::Query& q, CommState*& st, int* rc);

}  // namespace mlxa2a::core::mpi
