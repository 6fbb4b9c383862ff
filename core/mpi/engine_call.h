// One MPI_Alltoall call on the team's engine, whatever the engine route
// (line, copy, cma on one node; hier, rdma, zcopy on several; a local copy
// on a one-rank communicator), and the PMPI calls made beside its size check.
//
// Contract
// * Called only for an engine route (core/plan/plan.h), which every rank of the
//   communicator does for the same call; so it must take part in the engine
//   on every rank whatever its local arguments look like. Rank-local
//   differences are absorbed here: MPI_IN_PLACE (the receive buffer is copied
//   to scratch first), non-contiguous send or receive datatypes (PMPI_Pack /
//   PMPI_Unpack through scratch), large counts (bytes per peer is what the
//   engine sees).
// * bytes_per_peer is the same on all ranks (MPI's type-signature rule), > 0
//   and < 2^31 (dispatch falls through otherwise, on every rank alike), so
//   every count handed to PMPI_Pack/PMPI_Unpack fits an int.
// * Errors: once the engine may have moved data, a failure is reported as
//   MPI_ERR_OTHER through the communicator's error handler
//   (PMPI_Comm_call_errhandler) and returned; nothing is retried and nothing
//   waits forever (a dead or failed peer ends the wait, see core/shm).
// * Never throws.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/mpi/call.h"
#include "core/mpi/datatype.h"
#include "core/mpi/team.h"

namespace mlxa2a::core::mpi {

// route: the engine route decided (core/plan/plan.h, or measured), one of
// the engine's own (Engine::run); a route it cannot take runs as its default.
int engine_alltoall(const AlltoallArgs& args, Team& team, std::uint64_t bytes_per_peer,
                 Route route) noexcept;

// engine_alltoall for a call whose send and receive types are both plain named
// types (is_plain_named()) and whose sendbuf is not MPI_IN_PLACE: the buffers
// are the engine's blocks as they are.
int engine_alltoall_contiguous(const AlltoallArgs& args, Team& team, std::uint64_t bytes_per_peer,
                            Route route) noexcept;

// For a call that measured selection serves through PMPI on a team whose
// engine compares sizes (Team::compares_sizes): Engine::check_sizes, its
// mismatch reported as by the engine paths (MPI_ERR_TRUNCATE on every rank,
// the communicator usable afterwards). MPI_SUCCESS: every rank called with
// bytes_per_peer, PMPI may serve the call.
// Status::peer_in_pmpi (hierarchical engine: a rank went to PMPI) makes this
// rank call PMPI_Alltoall with its arguments too, and returns its result.
// A multi-node check that failed here (its transport; the engine is then
// contained or broken, as after a failed run) also returns MPI_SUCCESS,
// logged: a partner whose check passed goes on to PMPI_Alltoall or to an
// agreement, and this rank must meet it there (the failure surfaces at the
// next engine call, alike on every rank through the containment).
int engine_check_sizes(const AlltoallArgs& args, Team& team, std::uint64_t bytes_per_peer) noexcept;

// A call this rank serves through PMPI because of its own size or arguments,
// on a team whose engine compares sizes (docs/shm.md "Mixed decisions"):
// serve(ctx) is its PMPI_Alltoall (returning its result) and runs beside
// the engine's check (Engine::beside_pmpi), at most once; *served says
// whether it ran. Its result, or (it did not run) the mismatch reported as
// by the engine paths. An engine failure after serve ran is logged; the
// call's result stays PMPI's.
// trial: a pmpi trial of measured selection (SizeAgreement::trial_beside_pmpi):
// when the call did not match everywhere, the team counts a resync
// (Team::resyncs(), as the engine ranks of that call do), so the caller
// records no trial; the result is still PMPI's.
int engine_beside_pmpi(const AlltoallArgs& args, Team& team, std::uint64_t announced,
                    int (*serve)(void*), void* ctx, bool* served, bool trial = false) noexcept;

}  // namespace mlxa2a::core::mpi
