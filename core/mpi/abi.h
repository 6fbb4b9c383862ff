// The ABI-neutral face of the dispatcher, for shim/entry_c.cc.
//
// Why: a shim can end up preloaded under the other MPI family (Open MPI handles
// are pointers, MPICH handles are 32-bit integers). If our exported functions
// took MPI_Comm etc., the MPICH shim would truncate Open MPI's pointers before
// it could even tell that it is in the wrong process. So the exported entry
// points take every handle as a register-wide integer (on the LP64 ABIs we
// support — x86-64, aarch64, ppc64le — an int argument occupies a full register or
// 8-byte stack slot, so nothing is lost either way) and the dispatcher either
// converts it to this family's handle type or forwards it bit-for-bit to the MPI
// library that is really there.
//
// This header must not include <mpi.h>: entry_c.cc defines MPI_* with these types.
#pragma once

#include <atomic>
#include <cstdint>

namespace mlxa2a::core::mpi {

using RawHandle = std::uintptr_t;

struct RawAlltoallArgs {
  const void* sendbuf;
  std::int64_t sendcount;
  RawHandle sendtype;
  void* recvbuf;
  std::int64_t recvcount;
  RawHandle recvtype;
  RawHandle comm;
  bool large_count;   // MPI_Alltoall_c
  const char* entry;  // entry point name, for the trace
};

// MPI_X: hand the call on to the next definition of MPI_X when another
// library's (a PMPI tool loaded after mlxa2a, core/mpi/stacking.h) or when
// this shim is of the other family; else serve it as pmpi_*_entry does.
int alltoall_entry(const RawAlltoallArgs& args) noexcept;
int alltoall_c_entry(const RawAlltoallArgs& args) noexcept;  // MPI_Alltoall_c
int comm_split_entry(RawHandle comm, int color, int key, void* newcomm) noexcept;
int init_entry(int* argc, char*** argv) noexcept;
int init_thread_entry(int* argc, char*** argv, int required, int* provided) noexcept;
int finalize_entry() noexcept;
// PMPI_X: mlxa2a's work around the MPI's own PMPI_X (under the other family:
// the MPI's own PMPI_X alone, arguments bit-for-bit).
int pmpi_alltoall_entry(const RawAlltoallArgs& args) noexcept;
int pmpi_comm_split_entry(RawHandle comm, int color, int key, void* newcomm) noexcept;
int pmpi_init_entry(int* argc, char*** argv) noexcept;
int pmpi_init_thread_entry(int* argc, char*** argv, int required, int* provided) noexcept;

// Calls that entered PMPI_Alltoall[_c] on this thread so far (see
// core/mpi/stacking.h: whether a tool passes calls on to mlxa2a).
unsigned pmpi_alltoall_entries() noexcept;

// True when the MPI library in this process has this shim's ABI (cached).
bool family_ok() noexcept;

// The pass-through fast path (bench/results/fallthrough.md): while every
// MPI_Alltoall goes to PMPI unseen (pass_through(), core/mpi/runtime.h) and
// no tool after mlxa2a or MPI of the other family takes MPI_Alltoall, the
// shim's MPI_Alltoall calls the MPI's own PMPI_Alltoall straight from its
// arguments' registers (handles bit-for-bit, as forwarding does above):
// counted as a PMPI call, guarded as the dispatcher's calls are, so that a
// nested call is served uncounted. Null otherwise.
using RawAlltoallFn = int (*)(const void*, int, RawHandle, void*, int, RawHandle, RawHandle);
// Runtime::refresh_pass_through() sets it at every change of its inputs.
void refresh_fast_alltoall(bool pass_through) noexcept;

namespace detail {
inline constinit std::atomic<RawAlltoallFn> g_fast_alltoall{nullptr};
// ReentryGuard's depth (core/mpi/runtime.h) and the fast path's PMPI calls
// (added to PathCounts::pmpi by thread_path_counts()). initial-exec: the shim
// is loaded at start-up (LD_PRELOAD), so its few bytes of TLS come from the
// static block and each access is one instruction.
inline constinit thread_local int t_reentry_depth __attribute__((tls_model("initial-exec"))) = 0;
inline constinit thread_local std::uint64_t t_fast_pmpi
    __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace detail

inline RawAlltoallFn fast_alltoall_fn() noexcept {
  return detail::g_fast_alltoall.load(std::memory_order_relaxed);
}
inline int fast_alltoall(RawAlltoallFn fn, const void* sendbuf, int sendcount, RawHandle sendtype,
                         void* recvbuf, int recvcount, RawHandle recvtype, RawHandle comm) {
  if (detail::t_reentry_depth != 0) {
    return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  ++detail::t_reentry_depth;
  ++detail::t_fast_pmpi;
  const int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  --detail::t_reentry_depth;
  return rc;
}

}  // namespace mlxa2a::core::mpi
