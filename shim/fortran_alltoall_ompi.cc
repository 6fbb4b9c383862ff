// Fortran MPI_ALLTOALL entry points for Open MPI, whose Fortran bindings
// (mpif.h, `use mpi`, `use mpi_f08`) call PMPI_Alltoall directly and so bypass
// the C wrapper. (MPICH's Fortran bindings call the C MPI_Alltoall, so the MPICH shim
// needs none of these: they would count every call twice.)
//
// All Fortran arguments are passed by reference; handles are converted with
// PMPI_*_f2c; Fortran's MPI_IN_PLACE and MPI_BOTTOM are the addresses of Open
// MPI's common blocks and are translated to the C constants. In mpi_f08 the
// ierror argument is optional and arrives as a null pointer when absent.
#include <mpi.h>

#include "core/mpi/dispatch.h"
#include "core/mpi/abi.h"
#include "core/mpi/stacking.h"
#include "shim/fortran.h"

namespace {

namespace dispatch = mlxa2a::core::mpi;

// Address of a Fortran common block under each name mangling compilers use.
struct Marker {
  void* addr[4] = {};
  explicit Marker(const char* const (&names)[4]) {
    for (int i = 0; i < 4; ++i) addr[i] = dlsym(RTLD_DEFAULT, names[i]);
  }
  bool is(const void* p) const {
    for (void* a : addr) {
      if (a && a == p) return true;
    }
    return false;
  }
};

const Marker& in_place() {
  static const char* const kNames[4] = {"mpi_fortran_in_place", "mpi_fortran_in_place_",
                                        "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE"};
  static const Marker m(kNames);
  return m;
}

const Marker& bottom() {
  static const char* const kNames[4] = {"mpi_fortran_bottom", "mpi_fortran_bottom_",
                                        "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM"};
  static const Marker m(kNames);
  return m;
}

void* c_buffer(void* fortran_buf) {
  if (in_place().is(fortran_buf)) return MPI_IN_PLACE;
  if (bottom().is(fortran_buf)) return MPI_BOTTOM;
  return fortran_buf;
}

using AlltoallFn = void (*)(void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                            MPI_Fint*);

// Where a Fortran entry point hands calls on: under the other MPI family the
// MPI's own definition; else a tool's loaded after mlxa2a (core/mpi/stacking.h:
// it passes the call to PMPI_Alltoall, which is ours), or null: we serve it.
AlltoallFn hand_on_to(const char* name, const char* pname) {
  if (!dispatch::family_ok()) return mlxa2a::shim::next_symbol<AlltoallFn>(name);
  return reinterpret_cast<AlltoallFn>(dispatch::next_tool_definition(name, pname));
}

void alltoall_f(const char* name, void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm,
                MPI_Fint* ierr) {
  void* c_send = c_buffer(sendbuf);
  // With MPI_IN_PLACE the send count and type are not significant and may be
  // anything; do not convert them.
  const bool in_place_call = c_send == MPI_IN_PLACE;
  const int rc = dispatch::alltoall(
      {c_send, in_place_call ? 0 : *sendcount,
       in_place_call ? MPI_DATATYPE_NULL : PMPI_Type_f2c(*sendtype), c_buffer(recvbuf),
       *recvcount, PMPI_Type_f2c(*recvtype), PMPI_Comm_f2c(*comm), false, name});
  if (ierr) *ierr = static_cast<MPI_Fint>(rc);
}

}  // namespace

// One per name (each resolves its own next definition); psym: the profiling name.
#define MLXA2A_FORTRAN_ALLTOALL(sym, psym)                                                   \
  MLXA2A_EXPORT void sym(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,            \
                         void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,            \
                         MPI_Fint* comm, MPI_Fint* ierr) {                                  \
    static const AlltoallFn next = hand_on_to(#sym, #psym);                                  \
    if (next) return next(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, \
                          ierr);                                                            \
    alltoall_f(#sym, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr); \
  }

// mpif.h and `use mpi` (every gfortran/ifort/flang mangling), and `use mpi_f08`:
// MPI_Datatype and MPI_Comm in f08 are a derived type holding one integer, so a
// reference to one is a reference to its MPI_VAL.
MLXA2A_FORTRAN_ALLTOALL(mpi_alltoall, pmpi_alltoall)
MLXA2A_FORTRAN_ALLTOALL(mpi_alltoall_, pmpi_alltoall_)
MLXA2A_FORTRAN_ALLTOALL(mpi_alltoall__, pmpi_alltoall__)
MLXA2A_FORTRAN_ALLTOALL(MPI_ALLTOALL, PMPI_ALLTOALL)
MLXA2A_FORTRAN_ALLTOALL(mpi_alltoall_f08_, pmpi_alltoall_f08_)
