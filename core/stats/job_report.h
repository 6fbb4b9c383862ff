// The job-wide MLXA2A_COLL_STATS=json report (docs/stats.md), MPI-free: what
// one rank measured (RankStats), its text form for the gather to rank 0, and
// the report rank 0 renders from every rank's: min/median/max over ranks.
//
// Contract: plain values, no globals, no MPI; not thread-safe (the caller
// holds its own lock while recording). parse() rejects nothing silently: a
// line it cannot read is counted in RankStats::unreadable.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace mlxa2a::core::stats {

// Calls of one communicator size that took one path.
struct CallTotals {
  std::uint64_t calls = 0;
  std::uint64_t bytes = 0;  // sent by this rank: bytes per peer x communicator size
  double seconds = 0;       // in MPI_Alltoall, as the caller waited
};

// One measured decision (MLXA2A_TUNE=auto): agreed on every rank of the team.
struct Decision {
  int comm_size = 0;
  unsigned size_class = 0;  // bytes per peer in [2^c, 2^(c+1))
  std::string path;
  double agreement_seconds = 0;
  std::vector<std::pair<std::string, double>> medians_seconds;  // max over ranks
  bool operator<(const Decision& o) const {
    return std::tie(comm_size, size_class, path) < std::tie(o.comm_size, o.size_class, o.path);
  }
};

struct RankStats {
  std::map<std::pair<int, std::string>, CallTotals> calls;  // (comm size, path)
  std::vector<Decision> decisions;
  std::map<std::string, double> counters;  // RDMA, zero-copy, ...
  std::map<std::string, double> setup;     // seconds or counts of set-up work
  // This process's RDMA device and fabric settings, the key=value words of
  // the team trace line's fabric part (hca=, hca-by=, link=, tc=, sl=,
  // pkey=, ...), and its host; empty where no device was opened (not a
  // leader, or no RDMA). Kept as words so a field added to the trace line
  // reaches the report without a change here.
  std::string host;
  std::vector<std::pair<std::string, std::string>> fabric;
  unsigned unreadable = 0;

  // Sets host and fabric from a summary of space-separated key=value words;
  // a word without '=' is dropped.
  void set_fabric(const std::string& host_name, const std::string& summary);

  std::string serialize() const;
  static RankStats parse(const std::string& text);
};

// The JSON document (schema "mlxa2a-coll-stats/1", docs/stats.md).
// build: the shim's build line; ranks: one entry per rank, in rank order.
std::string render_job_report(const std::string& build, const std::vector<RankStats>& ranks);

// min, median (mean of the middle two for an even count), max; zeros if empty.
struct Spread {
  double min = 0, median = 0, max = 0;
};
Spread spread(std::vector<double> values);

}  // namespace mlxa2a::core::stats
