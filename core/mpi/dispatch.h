// The dispatcher: the one place an intercepted call is routed. shim/ packs each
// entry point's arguments and calls these; they never throw and they call only
// PMPI_* (or an engine).
//
// Contract for alltoall(): the result and the error class are those PMPI would
// give for the same arguments. Arguments that cannot be inspected safely
// (MPI_COMM_NULL, MPI_DATATYPE_NULL, negative counts) go to PMPI untouched so that
// PMPI raises the error exactly as without mlxa2a.
//
// Only what routes a call includes this: dispatch.cc, the entry adapter
// (abi.cc) and the shim. What merely reads a call (its arguments, the path
// counts, PMPI's own alltoall) includes core/mpi/call.h.
#pragma once

#include <mpi.h>

#include "core/mpi/call.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

int alltoall(const AlltoallArgs& args) noexcept;  // inline, below

namespace detail {
// Every call but a nested one or a pass-through (core/mpi/dispatch.cc).
int dispatch_alltoall(const AlltoallArgs& args) noexcept;
}  // namespace detail

// A nested call (ReentryGuard, runtime.h) or a pass-through (pass_through())
// is served inline, without the dispatcher: callgrind counted 166
// instructions added per pass-through call when every call went through it,
// 48 after (bench/results/fallthrough.md). The entry adapter (core/mpi/abi.cc)
// asks served_inline() before it builds the arguments, so that the inline
// path keeps them in registers.
inline bool served_inline() noexcept { return ReentryGuard::nested() || pass_through(); }
// Precondition: served_inline().
inline int serve_inline(const AlltoallArgs& a) noexcept {
  if (ReentryGuard::nested()) return pmpi_alltoall(a);
  // What the dispatcher would do with no trace, no timer and every size to
  // PMPI (or mlxa2a inactive): count the call and hand it on.
  ReentryGuard guard;
  ++detail::t_counts.pmpi;
  return pmpi_alltoall(a);
}

inline int alltoall(const AlltoallArgs& a) noexcept {
  return served_inline() ? serve_inline(a) : detail::dispatch_alltoall(a);
}
}  // namespace mlxa2a::core::mpi
