#include "core/mpi/topology.h"
#include "core/mpi/stacking.h"

#include <hwloc.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace mlxa2a::core::mpi {

namespace {

// Ranks of the whole job on this host, as exported by the launcher (other
// communicators' ranks compete for the same cores); 0 when unknown.
int launcher_local_size() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}

// Cores the ranks of real_node may run on: the union of their affinity masks
// (ranks bound to distinct cores add up; unbound ranks all see the whole
// machine). 0 when unknown.
int node_cores(MPI_Comm real_node) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
    for (long c = 0, n = sysconf(_SC_NPROCESSORS_ONLN); c < n && c < CPU_SETSIZE; ++c) {
      CPU_SET(static_cast<int>(c), &mine);
    }
  }
  std::uint64_t words[sizeof(cpu_set_t) / sizeof(std::uint64_t)];
  std::uint64_t all[sizeof(cpu_set_t) / sizeof(std::uint64_t)] = {};
  std::memcpy(words, &mine, sizeof words);
  const int count = static_cast<int>(sizeof words / sizeof words[0]);
  if (PMPI_Allreduce(words, all, count, MPI_UINT64_T, MPI_BOR, real_node) != MPI_SUCCESS) {
    return 0;
  }
  int cores = 0;
  for (std::uint64_t w : all) cores += __builtin_popcountll(w);
  return cores;
}

int read_cpu_domain(hwloc_obj_type_t type) {
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) return -1;
  int domain = -1;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set && hwloc_topology_load(topo) == 0 &&
      hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0 &&
      !hwloc_bitmap_isincluded(hwloc_topology_get_allowed_cpuset(topo), set)) {
    for (int i = 0, n = hwloc_get_nbobjs_by_type(topo, type); i < n; ++i) {
      const hwloc_obj_t o = hwloc_get_obj_by_type(topo, type, static_cast<unsigned>(i));
      if (o && o->cpuset && hwloc_bitmap_isincluded(set, o->cpuset)) {
        domain = static_cast<int>(o->logical_index);
        break;
      }
    }
  }
  if (set) hwloc_bitmap_free(set);
  hwloc_topology_destroy(topo);
  return domain;
}

}  // namespace

int cpu_domain(bool numa) {
  static std::once_flag once[2];
  static int domain[2] = {-1, -1};
  const int k = numa ? 0 : 1;
  std::call_once(once[k], [&] {
    domain[k] = read_cpu_domain(numa ? HWLOC_OBJ_NUMANODE : HWLOC_OBJ_PACKAGE);
  });
  return domain[k];
}

OwnedComm& OwnedComm::operator=(OwnedComm&& o) noexcept {
  if (this != &o) {
    reset();
    comm_ = o.comm_;
    o.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

void OwnedComm::reset() noexcept {
  if (comm_ != MPI_COMM_NULL) PMPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

bool node_of_comm(MPI_Comm comm, const config::NodeLayout& layout, NodeComm* out) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  OwnedComm real;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, real.out()) !=
      MPI_SUCCESS) {
    return false;
  }
  int real_size = 1;
  PMPI_Comm_size(real.get(), &real_size);
  const int cores = node_cores(real.get());
  const int job_local = launcher_local_size();
  const int competing = job_local > real_size ? job_local : real_size;
  out->oversubscribed = cores > 0 && competing > cores;

  if (layout.virtual_nodes()) {
    int world_rank = 0, world_size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    // World ranks, so that a process keeps its virtual node in every
    // communicator, as it would keep a real one.
    OwnedComm virt;
    if (mpi_own().comm_split(real.get(), layout.node_of(world_rank, world_size), rank, virt.out()) !=
        MPI_SUCCESS) {
      return false;
    }
    real = std::move(virt);
  }
  out->comm = std::move(real);
  PMPI_Comm_rank(out->comm.get(), &out->local_rank);
  PMPI_Comm_size(out->comm.get(), &out->local_size);
  return true;
}

}  // namespace mlxa2a::core::mpi
