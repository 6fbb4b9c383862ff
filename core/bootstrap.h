// Set-up communication among a group of processes (a team's leaders),
// transport-neutral: the RDMA transport exchanges its addresses through it.
//
// Contract: set-up only, never on the hot path. Every member calls the same
// sequence of allgather()s collectively, each with the same len. Returning
// false means the collective failed on this member; the caller then gives up
// (Status::bootstrap_failed) — but must still take part in the collectives
// its peers go on with, so callers keep every member's sequence alike.
// Implementations: core/mpi/group_bootstrap.h (PMPI on a communicator) and
// tests/mlx5/fork_group.h (forked processes, pipes).
#pragma once

#include <cstddef>

namespace mlxa2a {

struct GroupBootstrap {
  virtual ~GroupBootstrap() = default;
  virtual int rank() const = 0;  // 0 .. size()-1
  virtual int size() const = 0;  // >= 1
  // all receives size() * len bytes: member r's `mine` at r * len.
  virtual bool allgather(const void* mine, void* all, std::size_t len) = 0;
};

}  // namespace mlxa2a
