// Cost of mlxa2a's fall-through: MPI_Alltoall (interposed when the shim is
// preloaded) against the MPI's own PMPI_Alltoall, same arguments, in one
// process, alternating benchmark by benchmark. The difference is what mlxa2a adds
// to a call it passes on. Run single-rank on MPI_COMM_SELF so the MPI's own cost
// is small and steady:
//   LD_PRELOAD=build/shim/libmlxa2a-ompi.so build/bench/fallthrough_bench-ompi
//   (MLXA2A_TUNE=pmpi: the size is tuned to PMPI; default: no engine for the team)
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace {

int g_send[4], g_recv[4];

using AlltoallFn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);

// The shim defines PMPI_Alltoall too (for PMPI tools, README "With other PMPI
// tools"), so the name may be ours: look it up in the library that defines
// PMPI_Comm_rank, which no shim wraps.
AlltoallFn mpi_own_alltoall() {
  Dl_info info{};
  void* mpi = nullptr;
  if (dladdr(reinterpret_cast<void*>(&PMPI_Comm_rank), &info) && info.dli_fname) {
    mpi = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  }
  void* fn = mpi ? dlsym(mpi, "PMPI_Alltoall") : nullptr;
  if (!fn) {
    std::fprintf(stderr, "cannot find the MPI's own PMPI_Alltoall\n");
    std::exit(1);
  }
  return reinterpret_cast<AlltoallFn>(fn);
}

void BM_PMPI_Alltoall(benchmark::State& state) {
  static const AlltoallFn own = mpi_own_alltoall();
  for (auto _ : state) {
    own(g_send, 1, MPI_INT, g_recv, 1, MPI_INT, MPI_COMM_SELF);
    benchmark::DoNotOptimize(g_recv);
  }
}

void BM_MPI_Alltoall(benchmark::State& state) {
  for (auto _ : state) {
    MPI_Alltoall(g_send, 1, MPI_INT, g_recv, 1, MPI_INT, MPI_COMM_SELF);
    benchmark::DoNotOptimize(g_recv);
  }
}

// Interleaved registrations so drift in the machine affects both alike.
BENCHMARK(BM_PMPI_Alltoall)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_MPI_Alltoall)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
