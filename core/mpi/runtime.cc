#include "core/mpi/runtime.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

#include "core/config/registry.h"
#include "core/log.h"
#include "core/mpi/build_info.h"
#include "core/config/rules.h"
#include "core/mpi/call.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/counters.h"
#if MLXA2A_HAVE_VERBS
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/qos.h"
#include "core/mlx5/resources.h"
#endif
#include "core/mpi/engine_pool.h"
#include "core/mpi/job_stats.h"
#include "core/mpi/pmpi_transport.h"
#include "core/mpi/stacking.h"
#include "core/mpi/team_tuner.h"
#include "core/mpi/tune_store.h"
#include "core/shm/options.h"
#include "core/shm/segment.h"
#include "core/wait_cpu.h"
#include "core/hier/phases.h"

namespace mlxa2a::core::mpi {

namespace {

// The hierarchical engine's steps, summed over this process's rounds
// (core/hier/phases.h; docs/hier.md "Where the time goes").
void log_phases() {
  namespace ph = hier::phases;
  char line[256];
  int n = std::snprintf(line, sizeof line, "stats phases: rounds=%llu",
                        static_cast<unsigned long long>(ph::g_rounds.load()));
  for (int p = 0; p < ph::kCount && n > 0 && n < static_cast<int>(sizeof line); ++p) {
    n += std::snprintf(line + n, sizeof line - static_cast<std::size_t>(n), " %s_ns=%llu",
                       ph::kNames[p], static_cast<unsigned long long>(ph::g_ns[p].load()));
  }
  const LeaderMessageCounts m = leader_message_counts();
  log::trace("%s pmpi_leader_sends=%llu pmpi_leader_extra_sends=%llu", line,
             static_cast<unsigned long long>(m.sends),
             static_cast<unsigned long long>(m.sends - m.messages));
}

void shutdown_rdma() {
#if MLXA2A_HAVE_VERBS
  mlx5::EndpointPool::shutdown();
#endif
}

// Sonames of the PMPI libraries whose ABI this shim was compiled against.
#if defined(MLXA2A_FAMILY_OMPI)
constexpr std::string_view kFamily = "Open MPI";
constexpr std::string_view kSonames[] = {"libmpi.so.40"};
#elif defined(MLXA2A_FAMILY_MPICH)
constexpr std::string_view kFamily = "MPICH";
// MPICH's ABI is shared by derivatives that ship it as libmpi.so.12.
constexpr std::string_view kSonames[] = {"libmpich.so.12", "libmpi.so.12"};
#else
#error "build with MLXA2A_FAMILY_OMPI or MLXA2A_FAMILY_MPICH"
#endif

// Without a usable MPI the rank is unknown; launchers export it, so one line
// per job (not per rank) is printed when they do.
bool launcher_rank_is_zero() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* v = std::getenv(var)) return std::strcmp(v, "0") == 0;
  }
  return true;
}

int self_delete(MPI_Comm, int, void*, void*) {
  Runtime::instance().before_finalize();
  return MPI_SUCCESS;
}

}  // namespace

Runtime& Runtime::create_instance() {
  // Never destroyed: MPI may call our wrappers from atexit handlers.
  static Runtime* rt = new Runtime;
  instance_.store(rt, std::memory_order_release);
  return *rt;
}

bool mpi_family_matches(std::string* found) {
  // The MPI's own, not the shim's PMPI_Init (core/mpi/stacking.h).
  void* sym = mpi_own_symbol("PMPI_Init");
  Dl_info info{};
  if (!sym || !dladdr(sym, &info) || !info.dli_fname) {
    *found = "no PMPI_Init";
    return false;
  }
  std::string_view path(info.dli_fname);
  const std::size_t slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  *found = std::string(path);
  for (std::string_view soname : kSonames) {
    if (base.substr(0, soname.size()) == soname &&
        (base.size() == soname.size() || base[soname.size()] == '.')) {
      return true;
    }
  }
  return false;
}

void Runtime::load_settings(std::uint64_t* all_equal_hash, std::string* all_equal_summary) {
  config::Registry registry(config::all_switches());
  registry.load(config::process_environment());
  settings_ = config::settings_from(registry);
  coll_trace_.store(settings_.coll_trace, std::memory_order_relaxed);
  log::configure(settings_.log_level, settings_.log_file);
  if (settings_.coll_stats) core::wait_cpu::enable();  // the "stats waits:" line
  if (settings_.coll_stats) hier::phases::enable();   // the "stats phases:" line
  // Printed once per job by warn_once_per_job() (any rank may hold a bad
  // local value that the others lack).
  switch_warnings_ = registry.warnings();
#if MLXA2A_HAVE_VERBS
  // A verbs library or device that is not there is a bad value like any
  // other: said once per job (RDMA then falls back to PMPI leaders, as it
  // would silently). Probed only when the user named one.
  if (settings_.enable) {
    const mlx5::NetOptions net(settings_.net);
    const config::Registry::Entry* lib = registry.find("NET_VERBS_LIBRARY");
    const bool lib_set = lib != nullptr && lib->source != config::Source::Default;
    for (std::string& w : mlx5::unmatched_net_switches(net, lib_set)) {
      switch_warnings_.push_back(std::move(w));
    }
  }
#endif
  *all_equal_hash = registry.all_equal_hash();
  *all_equal_summary = registry.all_equal_summary();
}

void Runtime::apply_runtime_switches(const config::Registry& r) {
  std::lock_guard lock(mutex_);
  coll_trace_.store(config::coll_trace_of(r), std::memory_order_relaxed);
  log::set_level(config::log_level_of(r));
  refresh_pass_through();
}

void Runtime::publish(State s) {
  state_.store(s, std::memory_order_release);
  refresh_pass_through();
}

void Runtime::refresh_pass_through() {
  const State s = state();
  const bool unseen = !trace() && !job_stats::enabled();
  const bool all_pmpi = s == State::Inactive || s == State::Finalised ||
                        (s == State::Active && config::rules::pmpi_for_every_size(settings_.tune));
  detail::g_pass_through.store(unseen && all_pmpi, std::memory_order_relaxed);
  refresh_fast_alltoall(unseen && all_pmpi);
}

void Runtime::note_stacking() {
  // A library in the way of every MPI_Alltoall is reported like a bad switch:
  // once per job (every rank sees the same libraries).
  if (std::string w = check_stacking(); !w.empty()) switch_warnings_.push_back(std::move(w));
}

void Runtime::set_inactive(std::string reason) {
  inactive_reason_ = std::move(reason);
  publish(State::Inactive);
}

bool Runtime::settings_agree_across_world(std::uint64_t hash, const std::string& summary) {
  // max(h) == min(h) on all ranks <=> consistent; min(h) = ~max(~h), so one
  // allreduce of {h, ~h} with MPI_MAX decides it. The third value says whether
  // any rank has switch warnings: only then is a second collective needed. The
  // fourth whether any rank wants the job-wide stats report: then every rank
  // takes part in its gather at MPI_Finalize (core/mpi/job_stats.h).
  // The fifth whether any rank has a site tune file (then every team checks
  // it at a class's first call, collectively: tune_store.h), the sixth
  // whether any rank may run MPI calls from several threads at once (then
  // no decision is shared between communicators).
  int threads = MPI_THREAD_SINGLE;
  if (PMPI_Query_thread(&threads) != MPI_SUCCESS) threads = MPI_THREAD_MULTIPLE;
  std::uint64_t v[6] = {hash, ~hash, switch_warnings_.empty() ? 0u : 1u,
                        settings_.coll_stats_json ? 1u : 0u,
                        site_tune_file_present(settings_) ? 1u : 0u,
                        threads == MPI_THREAD_MULTIPLE ? 1u : 0u};
  if (PMPI_Allreduce(MPI_IN_PLACE, v, 6, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) {
    MLXA2A_LOG(Error, "allreduce of the switch hash failed; mlxa2a stands aside");
    return false;
  }
  job_stats::enable(v[3] != 0);
  any_site_tune_file_ = v[4] != 0;
  share_decisions_ = v[5] == 0;
  if (v[2] != 0) warn_once_per_job();
  if (v[0] == ~v[1]) return true;
  if (world_rank_ == 0 || hash != v[0]) {
    MLXA2A_LOG(Error,
               "all-equal switches differ across ranks; mlxa2a stands aside on every rank. "
               "This rank has: %s",
               summary.c_str());
  }
  return false;
}

namespace {

// FNV-1a: equal on every rank for equal text (std::hash promises nothing
// across processes).
std::uint64_t text_hash(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h | 1;  // 0 marks an unused entry
}

}  // namespace

void Runtime::warn_once_per_job() {
  // Each rank contributes the hashes of up to kShared warnings; a rank prints
  // a warning unless a lower rank has the same text. Warnings beyond kShared
  // (a rank with many bad switches) are printed by their rank regardless.
  constexpr std::size_t kShared = 8;
  int size = 1;
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  std::uint64_t mine[kShared] = {};
  for (std::size_t i = 0; i < kShared && i < switch_warnings_.size(); ++i) {
    mine[i] = text_hash(switch_warnings_[i]);
  }
  std::vector<std::uint64_t> all(kShared * static_cast<std::size_t>(size), 0);
  const bool gathered = PMPI_Allgather(mine, kShared, MPI_UINT64_T, all.data(), kShared,
                                       MPI_UINT64_T, MPI_COMM_WORLD) == MPI_SUCCESS;
  for (std::size_t i = 0; i < switch_warnings_.size(); ++i) {
    const std::string& w = switch_warnings_[i];
    bool lower_rank_has_it = false;
    if (gathered && i < kShared) {
      const std::size_t below = kShared * static_cast<std::size_t>(world_rank_);
      lower_rank_has_it = std::find(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(below),
                                    mine[i]) != all.begin() + static_cast<std::ptrdiff_t>(below);
    }
    if (lower_rank_has_it) MLXA2A_LOG(Debug, "%s", w.c_str());
    else MLXA2A_LOG(Warn, "%s", w.c_str());
  }
  switch_warnings_.clear();
}

void Runtime::after_init() {
  std::lock_guard lock(mutex_);
  if (state() != State::Uninitialised) return;
  const auto started = std::chrono::steady_clock::now();
  std::string found;
  if (!mpi_family_matches(&found)) {
    // Every MPI handle differs between the families: no MPI call is safe, not
    // even MPI_Comm_rank, so this rank cannot take part in any agreement.
    settings_ = config::Settings{};
    log::configure(log::Level::Warn, "");
    if (launcher_rank_is_zero()) {
      MLXA2A_LOG(Error,
               "this shim is built for %.*s but PMPI comes from %s; mlxa2a disables itself "
               "(use mlxa2a-run to pick the right library)",
                 static_cast<int>(kFamily.size()), kFamily.data(), found.c_str());
    }
    set_inactive("built for another MPI family");
    return;
  }
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  log::set_rank(world_rank_);
  std::uint64_t hash = 0;
  std::string summary;
  load_settings(&hash, &summary);
  if (world_rank_ == 0) MLXA2A_LOG(Info, "%s", shim_build_info());
  note_stacking();
  const bool agreed = settings_agree_across_world(hash, summary);

  if (PMPI_Comm_create_keyval(comm_state_copy, comm_state_delete, &comm_keyval_,
                              nullptr) != MPI_SUCCESS ||
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &self_keyval_, nullptr) !=
          MPI_SUCCESS ||
      PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval_, nullptr) != MPI_SUCCESS) {
    MLXA2A_LOG(Error, "cannot create MPI attribute keys; mlxa2a stands aside");
    set_inactive("attribute keys unavailable");
    return;
  }
  // Segments are unlinked once every rank attached; a job killed inside that
  // window leaves one behind. Every process sweeps at start (names of our uid
  // whose creator is dead), so no team has to be built for leftovers to go.
  if (const int removed = shm::remove_stale_segments(shm::Options{}.name_prefix); removed > 0) {
    MLXA2A_LOG(Info, "removed %d stale shared-memory segment(s) of dead processes", removed);
  }
  if (!agreed) {
    set_inactive("all-equal switches differ across ranks");
  } else if (!settings_.enable) {
    set_inactive("MLXA2A_ENABLE=n");
  } else {
    open_tune_store(settings_, any_site_tune_file_, share_decisions_, world_rank_);
    EnginePool::instance().set_capacity(settings_.shm.pool);
    // World's node map, once: communicators without a team of their own
    // derive from it (no discovery per communicator). Not where every size
    // goes to PMPI: no team is ever built then. Collective; agreed.
    if (!config::rules::pmpi_for_every_size(settings_.tune)) {
      if (!discover_world_origin(settings_)) {
        MLXA2A_LOG(Info, "node discovery of MPI_COMM_WORLD failed at MPI_Init; each "
                         "communicator discovers its nodes at its first alltoall");
      }
      check_tune_stamp(world_origin_map());
    }
    publish(State::Active);
  }
  job_stats::note_setup(
      "init_seconds",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  MLXA2A_LOG(Debug, "initialised for %.*s: %s%s", static_cast<int>(kFamily.size()),
             kFamily.data(), state() == State::Active ? "active" : "inactive: ",
             inactive_reason_.c_str());
}

State Runtime::lazy_init() {
  // Without MPI_Init every call comes here: a program of MPI 4 sessions only
  // (docs/ARCHITECTURE.md, "Before MPI_Init, and MPI 4 sessions"), or an
  // erroneous call that PMPI reports. Answered without the lock: one
  // PMPI_Initialized per call.
  int initialised = 0;
  PMPI_Initialized(&initialised);
  if (!initialised) return State::Uninitialised;
  std::lock_guard lock(mutex_);
  if (state() != State::Uninitialised) return state();
  int finalised = 0;
  PMPI_Finalized(&finalised);
  if (finalised) return State::Uninitialised;  // erroneous call: PMPI reports it
  std::string found;
  if (mpi_family_matches(&found)) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    log::set_rank(world_rank_);
    std::uint64_t hash = 0;
    std::string summary;
    load_settings(&hash, &summary);
    note_stacking();
    // No collective is possible here: rank 0 speaks for all.
    for (const std::string& w : switch_warnings_) {
      if (world_rank_ == 0) MLXA2A_LOG(Warn, "%s", w.c_str());
      else MLXA2A_LOG(Debug, "%s", w.c_str());
    }
    switch_warnings_.clear();
  }
  MLXA2A_LOG(Warn, "MPI was initialised by a call mlxa2a does not wrap; mlxa2a stands aside");
  set_inactive("MPI initialised without mlxa2a's MPI_Init");
  return state();
}

void Runtime::write_job_stats() {
  // This rank's process-wide counters (the per-rank "stats" lines' values).
  const PathCounts c = thread_path_counts();
  const RdmaCounters r = rdma_counters();
  const ZeroCopyStats z = zero_copy_stats();
  auto d = [](auto v) { return static_cast<double>(v); };
  const std::map<std::string, double> counters = {
      {"rdma_writes_posted", d(r.writes)},   {"rdma_bytes_written", d(r.bytes)},
      {"rdma_qps_live", d(r.qps_live)},      {"rdma_mrs_live", d(r.mrs_live)},
      {"rdma_messages_relayed", d(r.relayed)},
      {"zcopy_bytes_copied_on_node", d(z.copied)}, {"zcopy_bytes_zero_copy", d(z.zero_copy)},
      {"zcopy_staged_fallbacks", d(z.staged)}, {"rcache_hits", d(z.hits)},
      {"rcache_misses", d(z.misses)},        {"rcache_evictions", d(z.evictions)},
      {"rcache_invalidations", d(z.invalidations)}, {"registrations_refused", d(z.refused)},
      {"wait_cpu_seconds", d(core::wait_cpu::total_ns()) * 1e-9}};
  const std::map<std::string, double> setup = {
      {"rdma_qps_created", d(r.qps_created)},
      {"rdma_setup_bytes", d(r.setup_bytes)},
      {"rdma_setup_collectives", d(r.setup_collectives)},
      {"tuning_trial_calls", d(c.trials)},
      {"tuning_agreements", d(c.agreements)},
      {"tuning_agreement_seconds", c.agreement_seconds}};
#if MLXA2A_HAVE_VERBS
  const std::string fabric = mlx5::fabric_summary();
#else
  const std::string fabric;
#endif
  job_stats::write_report(settings_.coll_stats_path, counters, setup, fabric);
}

void Runtime::before_finalize() {
  std::lock_guard lock(mutex_);
  if (state() == State::Finalised) return;
  if (settings_.coll_stats) {
    const PathCounts c = thread_path_counts();
    log::trace("stats MPI_Alltoall calls on the finalizing thread: pmpi=%llu shm=%llu",
               static_cast<unsigned long long>(c.pmpi), static_cast<unsigned long long>(c.shm));
    const RdmaCounters r = rdma_counters();
    log::trace("stats rdma: calls=%llu writes_posted=%llu bytes_written=%llu qps_created=%llu "
               "qps_live=%ld mrs_live=%ld relayed=%llu setup_bytes=%llu setup_collectives=%llu "
               "peak_waiters=%llu polls_contended=%llu stripes_posted=%llu",
               static_cast<unsigned long long>(c.rdma), static_cast<unsigned long long>(r.writes),
               static_cast<unsigned long long>(r.bytes),
               static_cast<unsigned long long>(r.qps_created), r.qps_live, r.mrs_live,
               static_cast<unsigned long long>(r.relayed),
               static_cast<unsigned long long>(r.setup_bytes),
               static_cast<unsigned long long>(r.setup_collectives),
               static_cast<unsigned long long>(r.peak_waiters),
               static_cast<unsigned long long>(r.polls_contended),
               static_cast<unsigned long long>(r.stripes_posted));
    // Process-wide (every thread's calls): the hierarchical engine's copies
    // and what zero-copy read in their place (docs/zerocopy.md).
    const ZeroCopyStats z = zero_copy_stats();
    log::trace("stats zcopy: bytes_copied_on_node=%llu bytes_zero_copy=%llu staged_fallbacks=%llu "
               "cache_hits=%llu cache_misses=%llu cache_evictions=%llu "
               "cache_invalidations=%llu registrations_refused=%llu",
               static_cast<unsigned long long>(z.copied),
               static_cast<unsigned long long>(z.zero_copy),
               static_cast<unsigned long long>(z.staged), static_cast<unsigned long long>(z.hits),
               static_cast<unsigned long long>(z.misses),
               static_cast<unsigned long long>(z.evictions),
               static_cast<unsigned long long>(z.invalidations),
               static_cast<unsigned long long>(z.refused));
    // CPU time of this process's threads waiting inside mlxa2a (core/wait_cpu.h).
    log::trace("stats waits: cpu_ns=%llu",
               static_cast<unsigned long long>(core::wait_cpu::total_ns()));
    log_phases();
    log::trace("stats MPI_Alltoall tuning on the finalizing thread: trial calls=%llu "
               "agreements=%llu agreement time=%.1f us",
               static_cast<unsigned long long>(c.trials),
               static_cast<unsigned long long>(c.agreements), c.agreement_seconds * 1e6);
  }
  if (job_stats::enabled()) write_job_stats();
  if (state() == State::Active && world_rank_ == 0 && !settings_.tune_file.empty()) {
    close_tune_store(settings_);
  }
  // MPI_COMM_WORLD's state goes now, while every MPI call is still allowed
  // (its team may own a leaders' communicator to free); MPI would delete it
  // later inside MPI_Finalize.
  if (comm_keyval_ != MPI_KEYVAL_INVALID) {
    void* attr = nullptr;
    int found = 0;  // deleting an absent attribute is an error in Open MPI
    if (PMPI_Comm_get_attr(MPI_COMM_WORLD, comm_keyval_, &attr, &found) == MPI_SUCCESS && found) {
      PMPI_Comm_delete_attr(MPI_COMM_WORLD, comm_keyval_);
    }
  }
  publish(State::Finalised);
  EnginePool::instance().clear();  // teams MPI frees later unmap at once
  release_split_origins();
  // QPs go now; the CQ, PD and context when the last team still holding
  // registrations is freed inside MPI_Finalize (core/mlx5/endpoint_pool.h).
  shutdown_rdma();
  // The comm keyval's delete callbacks still run for communicators MPI frees
  // during finalize; freeing the keyval only marks it for deletion.
  if (comm_keyval_ != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&comm_keyval_);
  if (self_keyval_ != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&self_keyval_);
  MLXA2A_LOG(Debug, "finalised");
}

}  // namespace mlxa2a::core::mpi
