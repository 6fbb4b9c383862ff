// MLXA2A_COLL_STATS=json[:path]: one job-wide report, written by world rank 0
// at MPI_Finalize (docs/stats.md has the schema), besides the per-rank lines.
//
// Every rank records into a process-wide store (mutex-guarded; any thread):
// each MPI_Alltoall under (communicator size, path) with its bytes and time,
// each measured tuning decision, set-up costs. At MPI_Finalize every rank's
// store is gathered to rank 0 (core/stats/job_report.h renders it).
//
// Collective: enable() must be given the same value on every rank (the
// MPI_Init agreement ORs the ranks' wishes, core/mpi/runtime.cc), because
// write_report() is a gather over MPI_COMM_WORLD when enabled.
// Cost when off: one relaxed atomic load per MPI_Alltoall.
#pragma once

#include <atomic>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/mpi/call.h"
#include "core/route/route.h"

namespace mlxa2a::core::mpi::job_stats {

namespace detail {
inline constinit std::atomic<bool> g_on{false};
}  // namespace detail

void enable(bool on) noexcept;
// Inline: tested on every MPI_Alltoall (callgrind: an out-of-line call here
// cost 10 instructions per call, Open MPI).
inline bool enabled() noexcept { return detail::g_on.load(std::memory_order_relaxed); }

// Around one MPI_Alltoall (core/mpi/dispatch.cc alltoall(), outside the
// re-entry guard's nested calls, so one per thread at a time): when enabled,
// times the call and files it under the path the dispatcher counted for it
// (thread_path_counts()). Off, one load and two tests; the dispatcher keeps
// a single call site, so its body stays inlined (callgrind: a second call
// site cost 12 instructions per call with MPICH).
class CallTimer {
 public:
  explicit CallTimer(const AlltoallArgs& a) noexcept {
    if (enabled()) [[unlikely]] start(a);
  }
  ~CallTimer() {
    if (args_) [[unlikely]] finish();
  }
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

 private:
  void start(const AlltoallArgs& a) noexcept;
  void finish() noexcept;
  const AlltoallArgs* args_ = nullptr;
};

// A measured decision (core/mpi/team_tuner.cc): the candidates tried and their
// agreed medians (max over ranks), in the same order.
void note_decision(int comm_size, unsigned size_class, core::Route path,
                   std::span<const core::Route> candidates,
                   const std::vector<double>& medians_seconds, double agreement_seconds) noexcept;
// Adds value to a named set-up cost (seconds or a count).
void note_setup(const std::string& name, double value) noexcept;

// Collective over MPI_COMM_WORLD when enabled(): gathers every rank's store
// (with counters and setup, this rank's process-wide values, and fabric, its
// device's key=value summary or "") to rank 0, which writes the JSON to path.
// Disables recording. Never throws.
void write_report(const std::string& path, const std::map<std::string, double>& counters,
                  const std::map<std::string, double>& setup, const std::string& fabric) noexcept;

}  // namespace mlxa2a::core::mpi::job_stats
