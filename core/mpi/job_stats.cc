#include "core/mpi/job_stats.h"

#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "core/log.h"
#include "core/mpi/build_info.h"
#include "core/stats/job_report.h"

namespace mlxa2a::core::mpi::job_stats {

namespace {

struct Store {
  std::mutex mutex;
  stats::RankStats stats;
};

Store& store() {
  static Store* s = new Store;  // never destroyed: MPI may call us from atexit
  return *s;
}

const char* path_of(const PathCounts& before, const PathCounts& after) {
  if (after.rdma != before.rdma) return "rdma";
  if (after.shm != before.shm) return "shm";
  return "pmpi";  // counted as pmpi, or (zero bytes, contained) nothing moved
}

// Bytes this rank received (= sent in a correct call): bytes per peer x
// communicator size. Arguments the dispatcher leaves to PMPI to reject count
// 0 bytes and are not inspected (an invalid handle could abort the job).
std::pair<int, std::uint64_t> size_and_bytes(const AlltoallArgs& a) {
  int size = 0;
  MPI_Count type_size = 0;
  if (PMPI_Comm_size(a.comm, &size) != MPI_SUCCESS || a.recvtype == MPI_DATATYPE_NULL ||
      a.recvcount < 0 || PMPI_Type_size_x(a.recvtype, &type_size) != MPI_SUCCESS ||
      type_size < 0) {
    return {size, 0};
  }
  return {size, static_cast<std::uint64_t>(a.recvcount) * static_cast<std::uint64_t>(type_size) *
                    static_cast<std::uint64_t>(size)};
}

bool write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("?");
}

}  // namespace

void enable(bool on) noexcept { detail::g_on.store(on, std::memory_order_relaxed); }

// The call in progress on this thread (at most one: see CallTimer).
static thread_local struct {
  PathCounts before;
  std::chrono::steady_clock::time_point t0;
} t_call;

void CallTimer::start(const AlltoallArgs& a) noexcept {
  args_ = &a;
  t_call.before = thread_path_counts();
  t_call.t0 = std::chrono::steady_clock::now();
}

void CallTimer::finish() noexcept {
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_call.t0).count();
  const AlltoallArgs& a = *args_;
  if (a.comm == MPI_COMM_NULL) return;  // as the trace: no communicator, no size
  try {
    const auto [size, bytes] = size_and_bytes(a);
    const char* path = path_of(t_call.before, thread_path_counts());
    std::lock_guard lock(store().mutex);
    stats::CallTotals& t = store().stats.calls[{size, path}];
    ++t.calls;
    t.bytes += bytes;
    t.seconds += took;
  } catch (...) {
  }
}

void note_decision(int comm_size, unsigned size_class, core::Route path,
                   std::span<const core::Route> candidates,
                   const std::vector<double>& medians_seconds, double agreement_seconds) noexcept {
  if (!enabled()) return;
  try {
    stats::Decision d{comm_size, size_class, std::string(to_string(path)), agreement_seconds, {}};
    for (std::size_t i = 0; i < candidates.size() && i < medians_seconds.size(); ++i) {
      d.medians_seconds.emplace_back(std::string(to_string(candidates[i])), medians_seconds[i]);
    }
    std::lock_guard lock(store().mutex);
    store().stats.decisions.push_back(std::move(d));
  } catch (...) {
  }
}

void note_setup(const std::string& name, double value) noexcept {
  try {
    std::lock_guard lock(store().mutex);
    store().stats.setup[name] += value;
  } catch (...) {
  }
}

void write_report(const std::string& path, const std::map<std::string, double>& counters,
                  const std::map<std::string, double>& setup, const std::string& fabric) noexcept {
  if (!enabled()) return;
  enable(false);
  try {
    std::string mine;
    {
      std::lock_guard lock(store().mutex);
      stats::RankStats& s = store().stats;
      for (const auto& [n, v] : counters) s.counters[n] = v;
      for (const auto& [n, v] : setup) s.setup[n] += v;
      if (!fabric.empty()) s.set_fabric(host_name(), fabric);
      mine = s.serialize();
    }
    int rank = 0, size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(rank == 0 ? size : 0), offsets(lens.size());
    if (PMPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
      MLXA2A_LOG(Warn, "MLXA2A_COLL_STATS=json: gather failed; no report");
      return;
    }
    std::string all;
    if (rank == 0) {
      int total = 0;
      for (int i = 0; i < size; ++i) offsets[i] = total, total += lens[i];
      all.resize(static_cast<std::size_t>(total));
    }
    if (PMPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR,
                     0, MPI_COMM_WORLD) != MPI_SUCCESS) {
      MLXA2A_LOG(Warn, "MLXA2A_COLL_STATS=json: gather failed; no report");
      return;
    }
    if (rank != 0) return;
    std::vector<stats::RankStats> ranks;
    for (int i = 0; i < size; ++i) {
      ranks.push_back(stats::RankStats::parse(all.substr(static_cast<std::size_t>(offsets[i]),
                                                         static_cast<std::size_t>(lens[i]))));
    }
    if (write_file(path, stats::render_job_report(shim_build_info(), ranks))) {
      log::trace("stats json: job report of %d ranks written to %s", size, path.c_str());
    } else {
      MLXA2A_LOG(Warn, "MLXA2A_COLL_STATS=json: cannot write %s", path.c_str());
    }
  } catch (...) {
    MLXA2A_LOG(Warn, "MLXA2A_COLL_STATS=json: internal error; no report");
  }
}

}  // namespace mlxa2a::core::mpi::job_stats
