// Cost of mlxa2a's fall-through: MPI_Alltoall (interposed when the shim is
// preloaded) against PMPI_Alltoall (never interposed), same arguments, in one
// process, alternating benchmark by benchmark. The difference is what mlxa2a adds
// to a call it passes on. Run single-rank on MPI_COMM_SELF so the MPI's own cost
// is small and steady:
//   LD_PRELOAD=build/shim/libmlxa2a-ompi.so build/bench/fallthrough_bench-ompi
//   (MLXA2A_TUNE=pmpi: the size is tuned to PMPI; default: no engine for the team)
#include <benchmark/benchmark.h>
#include <mpi.h>

namespace {

int g_send[4], g_recv[4];

void BM_PMPI_Alltoall(benchmark::State& state) {
  for (auto _ : state) {
    PMPI_Alltoall(g_send, 1, MPI_INT, g_recv, 1, MPI_INT, MPI_COMM_SELF);
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
