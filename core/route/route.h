// Route: the one name for how an MPI_Alltoall call is served - in the
// decision (core/plan/plan.h), the engines, the measured selection, the
// tune file, MLXA2A_DEBUG_TUNE_TIMES, MLXA2A_TUNE and the trace.
//
// Concrete routes (pmpi .. zcopy) are what a call runs on; shm and rdma also
// name a family of them (the trace's path=, MLXA2A_TUNE), auto only a rule
// of MLXA2A_TUNE. Adding a route is one enumerator here, its name in
// route.cc, its place in the candidates (core/mpi/team_tuner.cc) and its case in
// the engine that runs it (core/mpi/shm_engine.cc, hier_engine.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mlxa2a::core {

enum class Route : std::uint8_t {
  pmpi,   // the MPI library's own alltoall
  line,   // single-node engine, line mode (core/shm/lines.h)
  copy,   // single-node engine, copy-in/copy-out through the slots
  cma,    // single-node engine, process_vm_readv from the peers' buffers
  hier,   // multi-node: shared-memory fan-in/fan-out, leaders over PMPI
  rdma,   // multi-node: the same, leaders write over RDMA (core/mlx5)
  zcopy,  // multi-node, RDMA: leaders' writes read the ranks' send buffers (docs/zerocopy.md)
  shm,    // the team's engine in the mode it picks by size (line/copy/cma or hier)
  auto_,  // MLXA2A_TUNE only: no rule, the fixed rules or measurement decide ("auto")
};
// Routes a call runs on: pmpi .. zcopy (the measured selection's candidates).
inline constexpr std::size_t kConcreteRoutes = 7;
inline constexpr std::size_t kRouteKinds = 9;

constexpr bool is_concrete(Route r) { return static_cast<std::size_t>(r) < kConcreteRoutes; }

// The family a route belongs to, by the names MLXA2A_TUNE accepts: pmpi, shm
// (line, copy, cma, hier, shm) or rdma (rdma, zcopy). The trace's path=.
constexpr Route family(Route r) {
  if (r == Route::rdma || r == Route::zcopy) return Route::rdma;
  if (r == Route::pmpi || r == Route::auto_) return r;
  return Route::shm;
}

std::string_view to_string(Route r);
std::optional<Route> route_from_string(std::string_view s);  // any of the nine names
// Only pmpi .. zcopy: for the tune file and MLXA2A_DEBUG_TUNE_TIMES.
std::optional<Route> concrete_route_from_string(std::string_view s);

}  // namespace mlxa2a::core
