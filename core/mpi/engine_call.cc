#include "core/mpi/engine_call.h"

#include <cstring>

#include "core/log.h"
#include "core/mpi/datatype.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

namespace {

Status run_engine(Team& team, const char* send, char* recv, std::uint64_t bytes,
                       Route route) {
  Engine* e = team.engine();
  if (!e) return Status::broken;  // no engine: selection never sends a call here
  return e->run(send, recv, bytes, route);
}

int report(MPI_Comm comm, const char* what) {
  // The error handler may return (MPI_ERRORS_RETURN) or abort the job.
  // Every later call on a broken engine fails too: rate-limited.
  MLXA2A_LOG_LIMITED(Error, "MPI_Alltoall through shared memory failed: %s", what);
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

// The engine's status as the call's result. A size mismatch across ranks is
// the program's error (mismatched type signatures, MPI 4.0 section 6.9): every
// rank gets it in the same call, agrees on a restart point and reports
// MPI_ERR_TRUNCATE, what the MPI reports for a message longer than its
// receive buffer; the communicator stays usable.
int engine_result(const AlltoallArgs& a, Team& team, Status st) {
  if (st == Status::ok) return MPI_SUCCESS;
  if (st == Status::size_mismatch) {
    if (!team.resync(a.comm)) return report(a.comm, "agreement after a size mismatch failed");
    MLXA2A_LOG_LIMITED(Info, "MPI_Alltoall: %s; MPI_ERR_TRUNCATE", to_string(st));
    PMPI_Comm_call_errhandler(a.comm, MPI_ERR_TRUNCATE);
    return MPI_ERR_TRUNCATE;
  }
  if (st == Status::peer_in_pmpi) {
    // A rank was sent to PMPI_Alltoall by its own size or arguments (an
    // erroneous program, or decisions the rules take per size): it waits
    // there, so this rank joins it and the MPI judges the call as it would
    // without mlxa2a. Counted like a mismatch (tuning records no trial).
    (void)team.resync(a.comm);  // the hierarchical engine's: no communication
    MLXA2A_LOG_LIMITED(Info, "MPI_Alltoall: %s; PMPI_Alltoall serves the call",
                       to_string(st));
    if (Runtime::instance().trace()) {
      // Not a call's line (those start with the entry's name): the call was
      // traced when it was routed to the engine.
      log::trace("mixed decisions: another rank of this %s went to PMPI; joining it there",
                 a.entry);
    }
    return pmpi_alltoall(a);
  }
  return report(a.comm, to_string(st));
}

struct Beside {
  int (*serve)(void*);
  void* ctx;
  bool ran = false;
  int rc = MPI_SUCCESS;
};

}  // namespace

int engine_check_sizes(const AlltoallArgs& a, Team& team, std::uint64_t bytes) noexcept {
  const Status st = team.sizes()->check_sizes(bytes);  // compares_sizes(): callers check
  if (st != Status::ok && st != Status::size_mismatch &&
      st != Status::peer_in_pmpi && team.engine_is(EngineProps::Kind::hier)) {
    MLXA2A_LOG_LIMITED(Warn, "%s: the engine's size check failed (%s); the call goes on without it",
                       a.entry, to_string(st));
    return MPI_SUCCESS;
  }
  return engine_result(a, team, st);
}

int engine_beside_pmpi(const AlltoallArgs& a, Team& team, std::uint64_t announced,
                    int (*serve)(void*), void* ctx, bool* served, bool trial) noexcept {
  Beside b{serve, ctx};
  auto call = [](void* p) {
    auto* self = static_cast<Beside*>(p);
    self->ran = true;
    self->rc = self->serve(self->ctx);
  };
  SizeAgreement& sizes = *team.sizes();
  const Status st = trial ? sizes.trial_beside_pmpi(announced, call, &b)
                          : sizes.beside_pmpi(announced, call, &b);
  *served = b.ran;
  if (!b.ran) return engine_result(a, team, st);
  if (trial && st == Status::size_mismatch) {
    (void)team.resync(a.comm);  // no trial anywhere; PMPI judged the call
    return b.rc;
  }
  if (st != Status::ok) {
    MLXA2A_LOG_LIMITED(Warn, "the engine's check beside PMPI_Alltoall failed (%s); later calls "
                       "on this communicator may fail", to_string(st));
  }
  return b.rc;
}

int engine_alltoall_contiguous(const AlltoallArgs& a, Team& team, std::uint64_t bytes,
                            Route route) noexcept {
  // An engine route is decided only for a team with an engine (decide.h),
  // which keeps it until the team is gone: no null check on the hot path.
  return engine_result(a, team,
                       team.engine()->run(static_cast<const char*>(a.sendbuf),
                                          static_cast<char*>(a.recvbuf), bytes, route));
}

int engine_alltoall(const AlltoallArgs& a, Team& team, std::uint64_t bytes,
                 Route route) noexcept {
  // Nothing to move; but when the engine compares sizes across ranks, a 0-byte
  // call takes part (in the engine's own empty round, whatever the route), so
  // that a peer called with more bytes is not left waiting.
  if (bytes == 0) {
    return team.compares_sizes() ? engine_result(a, team, team.engine()->run(nullptr, nullptr, 0))
                                 : MPI_SUCCESS;
  }
  const int n = team.size();
  // Peers may already wait in the engine for this call: a rank that cannot
  // prepare its buffers makes them fail too instead of leaving them waiting.
  auto give_up = [&](const char* why) {
    if (Engine* e = team.engine()) e->abandon();
    return report(a.comm, why);
  };
  const std::uint64_t total = bytes * static_cast<std::uint64_t>(n);
  const bool in_place = a.sendbuf == MPI_IN_PLACE;
  const Layout rl = layout_of(a.recvtype);
  const Layout sl = in_place || a.sendtype == a.recvtype ? rl : layout_of(a.sendtype);

  // A local failure (scratch allocation, packing) must not make this rank
  // skip the engine: its peers are already in it. It runs with whatever the
  // buffers hold and reports the error afterwards.
  const char* local_error = nullptr;
  char* recv = static_cast<char*>(a.recvbuf) + rl.offset;
  if (!rl.contiguous) {
    recv = team.scratch(1, total);
    if (!recv) return give_up("out of memory for the receive scratch buffer");
  }
  const char* send = static_cast<const char*>(a.sendbuf) + sl.offset;
  if (in_place || !sl.contiguous) {
    char* tmp = team.scratch(0, total);
    if (!tmp) return give_up("out of memory for the send scratch buffer");
    const void* src = in_place ? a.recvbuf : a.sendbuf;
    const std::int64_t count = in_place ? a.recvcount : a.sendcount;
    const MPI_Datatype type = in_place ? a.recvtype : a.sendtype;
    if (sl.contiguous) {
      std::memcpy(tmp, static_cast<const char*>(src) + sl.offset, total);
    } else if (!pack(src, count, type, sl, n, bytes, tmp, a.comm)) {
      local_error = "PMPI_Pack failed";
    }
    send = tmp;
  }

  if (const Status st = run_engine(team, send, recv, bytes, route); st != Status::ok) {
    return engine_result(a, team, st);
  }
  if (!rl.contiguous && !unpack(recv, bytes, n, a.recvbuf, a.recvcount, a.recvtype, rl, a.comm)) {
    local_error = "PMPI_Unpack failed";
  }
  return local_error ? report(a.comm, local_error) : MPI_SUCCESS;
}

}  // namespace mlxa2a::core::mpi
