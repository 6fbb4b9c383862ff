#include "core/mpi/abi.h"

#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/mpi/dispatch.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

namespace {

// This family's handle from a register-wide value: Open MPI handles are
// pointers; MPICH handles are 32-bit integers (upper bits are the caller's junk).
template <typename T>
T from_raw(RawHandle h) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<T>(h);
  } else {
    return static_cast<T>(static_cast<std::uint32_t>(h));
  }
}

// The MPI library's own definition of an entry point we interpose, used only
// when the shim is in a process of the other MPI family.
template <typename Fn>
Fn next_definition(const char* name) {
  void* sym = dlsym(RTLD_NEXT, name);
  if (!sym) {
    std::fprintf(stderr, "[mlxa2a] error: %s is not defined by this process's MPI\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(sym);
}

using ForeignAlltoall = int (*)(const void*, int, RawHandle, void*, int, RawHandle, RawHandle);
using ForeignAlltoallC = int (*)(const void*, std::int64_t, RawHandle, void*, std::int64_t,
                                 RawHandle, RawHandle);
using ForeignSplit = int (*)(RawHandle, int, int, void*);

int forward_alltoall(const RawAlltoallArgs& a) {
  if (a.large_count) {
    static const auto fn = next_definition<ForeignAlltoallC>("MPI_Alltoall_c");
    return fn(a.sendbuf, a.sendcount, a.sendtype, a.recvbuf, a.recvcount, a.recvtype, a.comm);
  }
  static const auto fn = next_definition<ForeignAlltoall>("MPI_Alltoall");
  return fn(a.sendbuf, static_cast<int>(a.sendcount), a.sendtype, a.recvbuf,
            static_cast<int>(a.recvcount), a.recvtype, a.comm);
}

}  // namespace

bool family_ok() noexcept {
  static const bool ok = [] {
    std::string found;
    return mpi_family_matches(&found);
  }();
  return ok;
}

int alltoall_entry(const RawAlltoallArgs& a) noexcept {
  if (!family_ok()) return forward_alltoall(a);
  return alltoall({a.sendbuf, a.sendcount, from_raw<MPI_Datatype>(a.sendtype), a.recvbuf,
                   a.recvcount, from_raw<MPI_Datatype>(a.recvtype), from_raw<MPI_Comm>(a.comm),
                   a.large_count, a.entry});
}

int comm_split_entry(RawHandle comm, int color, int key, void* newcomm) noexcept {
  if (!family_ok()) {
    static const auto fn = next_definition<ForeignSplit>("MPI_Comm_split");
    return fn(comm, color, key, newcomm);
  }
  return comm_split(from_raw<MPI_Comm>(comm), color, key, static_cast<MPI_Comm*>(newcomm));
}

int init_entry(int* argc, char*** argv) noexcept { return init(argc, argv); }

int init_thread_entry(int* argc, char*** argv, int required, int* provided) noexcept {
  return init_thread(argc, argv, required, provided);
}

int finalize_entry() noexcept { return finalize(); }

}  // namespace mlxa2a::core::mpi
