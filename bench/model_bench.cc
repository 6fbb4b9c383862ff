// The cost model of the hierarchical RDMA alltoall (issue 14 §5), at the
// reference layout: 23 nodes x 32 ranks (736 ranks), 1-128 bytes per peer.
//
// Measured here (Google Benchmark, one core): what one rank's fan-in and
// fan-out cost per call — the shm::copy_blocks calls the engine makes
// (core/hier/hier_alltoall.cc, block layout), over the runs of the engine's
// section layout (core/hier/rows.h): per node, 32 contiguous user blocks into
// one row of the in-area, and a column of 32 blocks out of the out-area
// (stride 32 x m, or 33 x m where the rows are rotated, from 64 B) — against
// one memcpy of the same bytes (736 x m).
// Stated, not measured (no ConnectX here): the adapter's figures and the
// node-local synchronisation, printed with their sources.
// The prediction is printed after the benchmarks:
//   T(m) = fan-in(m) + 2 x node sync + network(m) + fan-out(m)
//   network(m) = latency + max(writes / message rate, bytes out / bandwidth)
// with one leader per node posting N-1 = 22 writes of 32 x 32 x m bytes.
// Also: fan-out and memcpy from memory out of this core's caches (the *Cold
// variants), as the engine reads an out-area a NIC has just written.
// Unvalidated: the same kind of figures, played out on UCC tl/mlx5's published
// algorithm by bench/schedule_sim.py, give 0.14-0.36 of its published times
// (bench/results/scale.md), so this prediction is not evidence either.
// Run: build/bench/model_bench [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/hier/rows.h"
#include "core/shm/strided_copy.h"

namespace {

constexpr std::size_t kNodes = 23;
constexpr std::size_t kPerNode = 32;
constexpr std::size_t kRanks = kNodes * kPerNode;
constexpr std::size_t kLocal = 5;  // any local rank but 0 (whose rotated row is one run)

// ConnectX-6 VPI (HDR InfiniBand / 200 GbE), NVIDIA's adapter documentation
// (docs.nvidia.com/networking/display/ConnectX6EN/Introduction): "up to two
// ports of 200Gb/s ... sub-600ns latency and 215 million messages per second".
constexpr double kLatencyS = 0.6e-6;
constexpr double kMessagesPerS = 215e6;
constexpr double kBytesPerS = 200e9 / 8;
// Node-local synchronisation: one flag handoff among 32 ranks of one node
// (arrive/wait, release/wait: two per round). An assumption (a cache-line
// transfer between sockets is ~0.1-0.2 us; 32 waiters polling one line cost
// more); bench/handoff_floor measures it on a given host.
constexpr double kSyncS = 1.0e-6;
// The public reference, 1-128 B (../shared/reference/seed-table.md, averages).
constexpr double kTlMlx5Us[] = {95.85, 95.76, 100.96, 112.16, 178.82, 201.71, 336.13, 643.67};
constexpr double kHcollUs[] = {112.15, 118.68, 139.34, 301.91, 119.70, 235.14, 379.98, 578.52};

struct Buffers {
  std::vector<char> user, stage;
  explicit Buffers(std::size_t m) : user(kRanks * m, 1), stage(kPerNode * kRanks * m, 2) {}
};

using mlxa2a::hier::BlockRun;

// One node's share of a fan-in: rank `local`'s blocks for the node's 32
// members (contiguous in its send buffer) into row `local` of the section.
void fan_in_node(char* section, const char* user, std::size_t local, std::size_t m) {
  auto row = [&](const BlockRun& r) __attribute__((always_inline)) {  // as the engine's
    mlxa2a::shm::copy_blocks(section + r.slot * m, m, user + r.first * m, m, m, r.count);
  };
  mlxa2a::hier::row_runs(local, kPerNode, m, row);
}

// One node's share of a fan-out: column `local` of the section, block [s][local]
// from each of the node's 32 sources, into the receive buffer.
void fan_out_node(char* user, const char* section, std::size_t local, std::size_t m) {
  auto column = [&](const BlockRun& r) __attribute__((always_inline)) {
    mlxa2a::shm::copy_blocks(user + r.first * m, m, section + r.slot * m, r.step * m, m, r.count);
  };
  mlxa2a::hier::column_runs(local, kPerNode, kPerNode, m, column);
}

// Fan-in: for each node k, this rank's 32 blocks for k's members go to
// section k (kPerNode rows of 32 blocks), row kLocal.
void BM_FanIn(benchmark::State& state) {
  const std::size_t m = static_cast<std::size_t>(state.range(0));
  Buffers b(m);
  for (auto _ : state) {
    for (std::size_t k = 0; k < kNodes; ++k) {
      fan_in_node(b.stage.data() + k * kPerNode * kPerNode * m, b.user.data() + k * kPerNode * m,
                  kLocal, m);
    }
    benchmark::DoNotOptimize(b.stage.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRanks * m));
}

// Fan-out: from section k, block [s][kLocal] for every source s of node k.
void BM_FanOut(benchmark::State& state) {
  const std::size_t m = static_cast<std::size_t>(state.range(0));
  Buffers b(m);
  for (auto _ : state) {
    for (std::size_t k = 0; k < kNodes; ++k) {
      fan_out_node(b.user.data() + k * kPerNode * m, b.stage.data() + k * kPerNode * kPerNode * m,
                   kLocal, m);
    }
    benchmark::DoNotOptimize(b.user.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRanks * m));
}

// The same bytes in one memcpy: the bound a copy of this size can reach.
void BM_Memcpy(benchmark::State& state) {
  const std::size_t m = static_cast<std::size_t>(state.range(0));
  Buffers b(m);
  for (auto _ : state) {
    std::memcpy(b.stage.data(), b.user.data(), kRanks * m);
    benchmark::DoNotOptimize(b.stage.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRanks * m));
}

// The same fan-out and memcpy from memory no cache of this core holds — as
// after a NIC's (or another core's) writes: kCold buffer sets used in turn,
// and in each another local rank's column (the memcpy: another 736 x m bytes
// of the stage), so an iteration's source bytes were last read 256
// iterations ago (12-48 MiB apart at 64-256 B: out of this core's 2 MiB L2,
// in the shared L3 as a NIC's writes would be). The hot variants above
// repeat on the same lines, where a 32 x m column stride (4 KiB at 128 B)
// would map a fan-out's blocks onto few cache sets (why the rows are rotated
// from 64 B, core/hier/rows.h); here every block is a miss anyway.
constexpr std::size_t kCold = 8;

// Runs op(buffers, local, m) once per iteration over the cold buffer sets.
template <typename Op>
void run_cold(benchmark::State& state, Op op) {
  const std::size_t m = static_cast<std::size_t>(state.range(0));
  std::vector<Buffers> b;
  for (std::size_t i = 0; i < kCold; ++i) b.emplace_back(m);
  std::size_t r = 0, local = 0;
  for (auto _ : state) {
    op(b[r], local, m);
    benchmark::DoNotOptimize(b[r].user.data());
    benchmark::ClobberMemory();
    if (++r == kCold) r = 0, local = (local + 1) % kPerNode;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRanks * m));
}

void BM_FanOutCold(benchmark::State& state) {
  run_cold(state, [](Buffers& b, std::size_t local, std::size_t m) {
    for (std::size_t k = 0; k < kNodes; ++k) {
      fan_out_node(b.user.data() + k * kPerNode * m, b.stage.data() + k * kPerNode * kPerNode * m,
                   local, m);
    }
  });
}

void BM_MemcpyCold(benchmark::State& state) {
  run_cold(state, [](Buffers& b, std::size_t local, std::size_t m) {
    std::memcpy(b.user.data(), b.stage.data() + local * kRanks * m, kRanks * m);
  });
}

// 1-128 (the reference's sizes) and two that are not powers of two (3 ints,
// 3 doubles), which copy_blocks moves as two overlapping fixed moves.
BENCHMARK(BM_FanIn)->RangeMultiplier(2)->Range(1, 128)->Arg(12)->Arg(24);
BENCHMARK(BM_FanOut)->RangeMultiplier(2)->Range(1, 128)->Arg(12)->Arg(24);
BENCHMARK(BM_Memcpy)->RangeMultiplier(2)->Range(1, 128)->Arg(12)->Arg(24);
BENCHMARK(BM_FanOutCold)->Arg(64)->Arg(128)->Arg(256);
BENCHMARK(BM_MemcpyCold)->Arg(64)->Arg(128)->Arg(256);

// Keeps the console output and records seconds per call by benchmark name
// (the median when repetitions are asked for, else the single run), CPU time.
class Recorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Iteration || median) {
        std::string name = r.run_name.str();
        // CPU time: on a shared machine wall time also counts other jobs.
        seconds[name] = r.GetAdjustedCPUTime() * 1e-9;  // time unit: ns (default)
      }
    }
  }
  std::map<std::string, double> seconds;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);
  auto get = [&](const char* bm, long m) {
    auto it = rec.seconds.find(std::string(bm) + "/" + std::to_string(m));
    return it == rec.seconds.end() ? -1.0 : it->second;
  };
  std::printf("\n# Model: %zu nodes x %zu ranks, one leader per node, ConnectX-6 figures: "
              "latency %.1f us, %.0f M msg/s, %.0f GB/s (NVIDIA ConnectX-6 user manual); node "
              "sync %.1f us each (assumed)\n",
              kNodes, kPerNode, kLatencyS * 1e6, kMessagesPerS / 1e6, kBytesPerS / 1e9,
              kSyncS * 1e6);
  std::printf("%-6s %9s %9s %9s %8s %8s %9s %12s %9s %8s\n", "# m(B)", "fanin_us", "fanout_us",
              "memcpy_us", "in/cpy", "out/cpy", "net_us", "predicted_us", "tl/mlx5", "HCOLL");
  int i = 0;
  for (long m = 1; m <= 128; m *= 2, ++i) {
    const double in = get("BM_FanIn", m), out = get("BM_FanOut", m), cpy = get("BM_Memcpy", m);
    if (in < 0 || out < 0 || cpy < 0) continue;  // filtered out
    const double writes = kNodes - 1;
    const double bytes = writes * kPerNode * kPerNode * static_cast<double>(m);
    const double net = kLatencyS + std::max(writes / kMessagesPerS, bytes / kBytesPerS);
    const double total = in + 2 * kSyncS + net + out;
    // in/cpy: memcpy time over fan-in time = fan-in bandwidth as a share of memcpy's.
    std::printf("%-6ld %9.2f %9.2f %9.2f %8.2f %8.2f %9.2f %12.2f %9.2f %8.2f\n", m, in * 1e6,
                out * 1e6, cpy * 1e6, cpy / in, cpy / out, net * 1e6, total * 1e6, kTlMlx5Us[i],
                kHcollUs[i]);
  }
  std::printf("# from memory no cache of this core holds (as after the NIC's writes):\n");
  std::printf("%-6s %9s %9s %8s\n", "# m(B)", "fanout_us", "memcpy_us", "out/cpy");
  for (long m : {64L, 128L, 256L}) {
    const double out = get("BM_FanOutCold", m), cpy = get("BM_MemcpyCold", m);
    if (out < 0 || cpy < 0) continue;
    std::printf("%-6ld %9.2f %9.2f %8.2f\n", m, out * 1e6, cpy * 1e6, cpy / out);
  }
  benchmark::Shutdown();
  return 0;
}
