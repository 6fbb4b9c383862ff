// FakeClock: made-up trial durations for tests (MLXA2A_DEBUG_TUNE_TIMES), so
// that a test can decide which path wins and skew one rank's view. MPI-free.
//
// Syntax: groups separated by ';', each "[RANK:]NAME=MICROSECONDS[,NAME=...]",
// NAME a concrete Route name (pmpi .. zcopy). A group without RANK applies to every rank; a group
// with RANK (an MPI_COMM_WORLD rank) overrides it for that rank. A candidate
// no group names is timed for real. Example: "pmpi=5,copy=2;1:copy=50".
// Empty: no fake timings.
// A switch's syntax, so it lives with the switches (checked at load);
// core/mpi/tuning reads the clock. Immutable after parse; thread-safe.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/route/route.h"

namespace mlxa2a::core::config {

inline constexpr std::string_view kFakeClockSyntax =
    "groups separated by ';' of [RANK:]PATH=MICROSECONDS[,PATH=...], PATH = pmpi, line, copy, "
    "cma, hier, rdma or zcopy, e.g. pmpi=5,copy=2;1:copy=50";

class FakeClock {
 public:
  static std::optional<FakeClock> parse(std::string_view text);
  // The made-up duration (seconds) of a call on `path` at world rank `rank`.
  std::optional<double> seconds(int rank, Route path) const;
  bool empty() const { return groups_.empty(); }

 private:
  struct Group {
    int rank = -1;  // -1: every rank
    std::array<double, kConcreteRoutes> us{};  // < 0: not given
  };
  std::vector<Group> groups_;
};

}  // namespace mlxa2a::core::config
