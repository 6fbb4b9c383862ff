#include "core/mpi/call.h"

#include <cstdio>
#include <cstdlib>

#include "core/log.h"
#include "core/mpi/abi.h"
#include "core/mpi/datatype.h"

namespace mlxa2a::core::mpi {

PathCounts thread_path_counts() noexcept {
  PathCounts c = detail::t_counts;
  c.pmpi += detail::t_fast_pmpi;  // the shim's pass-through fast path (core/mpi/abi.h)
  return c;
}

std::string comm_label(MPI_Comm comm) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int len = 0;
  if (PMPI_Comm_get_name(comm, name, &len) == MPI_SUCCESS && len > 0) return name;
  char id[24];
  std::snprintf(id, sizeof id, "comm#%x", static_cast<unsigned>(PMPI_Comm_c2f(comm)));
  return id;
}

// Checks what can be checked without an MPI call; see the header's contract.
const char* invalid_argument(const AlltoallArgs& a) noexcept {
  if (a.comm == MPI_COMM_NULL) return "invalid argument (MPI_COMM_NULL): PMPI reports it";
  if (a.recvtype == MPI_DATATYPE_NULL || a.recvcount < 0) {
    return "invalid argument (receive count or type): PMPI reports it";
  }
  if (a.sendbuf != MPI_IN_PLACE && (a.sendtype == MPI_DATATYPE_NULL || a.sendcount < 0)) {
    return "invalid argument (send count or type): PMPI reports it";
  }
  // MPI_IN_PLACE is a sentinel address (not null in either MPI): as the
  // receive buffer it is erroneous, and the engine would write through it.
  if (a.recvbuf == MPI_IN_PLACE) {
    return "invalid argument (MPI_IN_PLACE as receive buffer): PMPI reports it";
  }
  // Send and receive buffers must not alias (MPI 4.0 section 2.3); MPICH
  // reports it, and the engine assumes distinct buffers. Only with equal
  // signatures, as MPICH checks: MPI_BOTTOM in both places with different
  // absolute-address types is correct.
  if (a.sendbuf == a.recvbuf && a.sendtype == a.recvtype && a.sendcount == a.recvcount &&
      a.recvcount != 0) {
    return "invalid argument (send buffer is the receive buffer): PMPI judges it";
  }
  return nullptr;
}


// Whether this rank's send signature carries as many bytes per peer as its
// receive signature (bytes). A mismatch is erroneous (MPI 4.0 section 6.9:
// the type signatures must match); the MPI reports it as it sees fit (Open
// MPI checks it locally, MPICH finds the truncation), so PMPI judges. Rank-
// local: every rank whose arguments are alike takes the same decision.
// *send_bytes, written only when they differ: the send size per peer when
// known, else bytes + 1 (a value no correct peer announces). A match leaves
// it alone: it is what this rank announces to the engine's size check (a
// rank whose send type differs from its receive type with the same size
// announced bytes + 1 and made a correct call fail with MPI_ERR_TRUNCATE).
bool sizes_match(const AlltoallArgs& a, std::uint64_t bytes, std::uint64_t* send_bytes) noexcept {
  if (a.sendbuf == MPI_IN_PLACE) return true;
  if (a.sendtype == a.recvtype && a.sendcount == a.recvcount) return true;
  MPI_Count type_size = static_cast<MPI_Count>(predefined_scalar_size(a.sendtype));
  std::uint64_t sent = 0;
  if ((type_size == 0 &&
       (PMPI_Type_size_x(a.sendtype, &type_size) != MPI_SUCCESS || type_size < 0)) ||
      __builtin_mul_overflow(static_cast<std::uint64_t>(a.sendcount),
                             static_cast<std::uint64_t>(type_size), &sent)) {
    *send_bytes = bytes + 1;
    return false;
  }
  if (sent == bytes) return true;
  *send_bytes = sent;
  return false;
}


// Contiguous buffers of plain named types: the engine takes them as they are,
// and a later call with the same signature may repeat the decision.
bool plain_call(const AlltoallArgs& a, std::uint64_t bytes) noexcept {
  return bytes != 0 && a.sendbuf != MPI_IN_PLACE && is_plain_named(a.recvtype) &&
         (a.sendtype == a.recvtype || is_plain_named(a.sendtype));
}


// The receive signature's bytes per peer into *bytes; why PMPI decides
// instead when it cannot be known.
const char* receive_bytes(const AlltoallArgs& a, std::uint64_t* bytes) noexcept {
  MPI_Count type_size = static_cast<MPI_Count>(predefined_scalar_size(a.recvtype));
  if (type_size == 0 &&
      (PMPI_Type_size_x(a.recvtype, &type_size) != MPI_SUCCESS || type_size < 0)) {
    return "receive type size unknown: PMPI decides";
  }
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(a.recvcount),
                             static_cast<std::uint64_t>(type_size), bytes)) {
    return "invalid argument (receive size overflows): PMPI judges it";
  }
  return nullptr;
}


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
