// Runtime: mlxa2a's process-wide state (one per process).
//
// Life cycle: Uninitialised -> Active or Inactive (after PMPI_Init*: the
// switches are loaded and the all-equal ones compared with one allreduce over
// MPI_COMM_WORLD, so every rank gets the same verdict - mlxa2a's only
// world-wide collective) -> Finalised (a delete callback on MPI_COMM_SELF,
// which MPI runs first in MPI_Finalize whichever language called it).
//
// Thread safety: after_init()/before_finalize() hold a mutex; state() and
// settings() are safe from any thread once state() != Uninitialised
// (settings are written before the state is published, release ordering).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/config/switches.h"
#include "core/mpi/abi.h"

namespace mlxa2a::core::mpi {

enum class State : std::uint8_t { Uninitialised, Active, Inactive, Finalised };

namespace detail {
inline constinit std::atomic<bool> g_pass_through{false};
}  // namespace detail
// True while every MPI_Alltoall goes to PMPI unseen: initialised, no trace,
// no job report, and mlxa2a inactive, finalised or MLXA2A_TUNE sending every
// size to PMPI. Then the dispatcher only counts the call and hands it on
// (bench/results/fallthrough.md). Kept by Runtime at every change of those
// inputs; a relaxed load, as the trace switch itself.
inline bool pass_through() noexcept {
  return detail::g_pass_through.load(std::memory_order_relaxed);
}

class Runtime {
 public:
  // Inline: asked on every call (callgrind: the out-of-line look-up cost 5
  // instructions and a call per MPI_Alltoall).
  static Runtime& instance() {
    if (Runtime* rt = instance_.load(std::memory_order_acquire)) [[likely]] return *rt;
    return create_instance();
  }

  State state() const { return state_.load(std::memory_order_acquire); }
  // Valid once state() != Uninitialised.
  const config::Settings& settings() const { return settings_; }
  // MLXA2A_COLL_TRACE as it is now: an MPI_T write may change it at any time.
  config::CollTrace coll_trace() const { return coll_trace_.load(std::memory_order_relaxed); }
  bool trace() const { return coll_trace() != config::CollTrace::None; }
  // Applies a runtime-writable switch's new value (core/mpi/mpit.h).
  void apply_runtime_switches(const config::Registry& r);
  const std::string& inactive_reason() const { return inactive_reason_; }
  int comm_keyval() const { return comm_keyval_; }
  int world_rank() const { return world_rank_; }

  // After PMPI_Init/PMPI_Init_thread returned MPI_SUCCESS. Collective over
  // MPI_COMM_WORLD (one allreduce) unless the shim was built for the other MPI
  // family. Idempotent.
  void after_init();
  // At an intercepted call while state() == Uninitialised: MPI may have been
  // initialised by a path we do not wrap. No collective is possible here, so
  // mlxa2a stands aside (traced). Returns the resulting state.
  State lazy_init();
  // Start of MPI_Finalize: no engine runs after this.
  void before_finalize();

  // The per-communicator sequence number used to name communicators in traces.
  std::uint64_t next_comm_id() { return comm_ids_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Runtime() = default;
  static Runtime& create_instance();
  static constinit inline std::atomic<Runtime*> instance_{nullptr};
  void load_settings(std::uint64_t* all_equal_hash, std::string* all_equal_summary);
  bool settings_agree_across_world(std::uint64_t local_hash, const std::string& summary);
  // Prints the switch warnings of every rank, each distinct text once per job
  // (by the lowest rank that has it). Collective over MPI_COMM_WORLD.
  void warn_once_per_job();
  // Checks how MPI_Alltoall reaches mlxa2a past other PMPI tools
  // (core/mpi/stacking.h); a warning joins the switch warnings.
  void note_stacking();
  void set_inactive(std::string reason);
  // Publishes a new state, then pass_through() for it. Under mutex_.
  void publish(State s);
  // pass_through() from the state, the trace switch and the job report. Under mutex_.
  void refresh_pass_through();
  // MLXA2A_COLL_STATS=json: the job report (collective over MPI_COMM_WORLD).
  void write_job_stats();

  std::mutex mutex_;
  std::atomic<State> state_{State::Uninitialised};
  config::Settings settings_;
  std::atomic<config::CollTrace> coll_trace_{config::CollTrace::None};
  std::string inactive_reason_;
  int comm_keyval_ = MPI_KEYVAL_INVALID;
  int self_keyval_ = MPI_KEYVAL_INVALID;
  int world_rank_ = -1;
  std::vector<std::string> switch_warnings_;  // from load_settings, printed once per job
  bool any_site_tune_file_ = false;  // agreed at init (tune_store.h)
  bool share_decisions_ = false;     // agreed at init: no rank has MPI_THREAD_MULTIPLE
  std::atomic<std::uint64_t> comm_ids_{0};
};

// True when the PMPI library in this process has the ABI this shim was built
// for; otherwise *found names the library that provides PMPI_Init.
bool mpi_family_matches(std::string* found);

// Re-entrancy guard: MPI calls made by mlxa2a itself (or by the MPI library from
// inside one of ours) must go straight to PMPI.
class ReentryGuard {
 public:
  ReentryGuard() noexcept { ++detail::t_reentry_depth; }
  ~ReentryGuard() { --detail::t_reentry_depth; }
  ReentryGuard(const ReentryGuard&) = delete;
  ReentryGuard& operator=(const ReentryGuard&) = delete;
  static bool nested() noexcept { return detail::t_reentry_depth > 0; }
};

}  // namespace mlxa2a::core::mpi
