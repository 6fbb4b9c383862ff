#include "core/mpi/call.h"

#include <cstdlib>

#include "core/log.h"

namespace mlxa2a::core::mpi {

PathCounts thread_path_counts() noexcept { return detail::t_counts; }

#ifdef MLXA2A_HAVE_LARGE_COUNT
int detail::pmpi_alltoall_c(const AlltoallArgs& a) noexcept {
  using AlltoallC = int (*)(const void*, MPI_Count, MPI_Datatype, void*, MPI_Count,
                            MPI_Datatype, MPI_Comm);
  const auto fn = reinterpret_cast<AlltoallC>(mpi_own().alltoall_c);
  if (!fn) {
    MLXA2A_LOG(Error, "PMPI_Alltoall_c is not defined by this process's MPI");
    std::abort();
  }
  return fn(a.sendbuf, static_cast<MPI_Count>(a.sendcount), a.sendtype, a.recvbuf,
            static_cast<MPI_Count>(a.recvcount), a.recvtype, a.comm);
}
#endif

}  // namespace mlxa2a::core::mpi
