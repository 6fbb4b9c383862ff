#include "core/mpi/abi.h"

#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/mpi/dispatch.h"
#include "core/mpi/lifecycle.h"
#include "core/mpi/runtime.h"
#include "core/mpi/stacking.h"

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

using ForeignAlltoall = int (*)(const void*, int, RawHandle, void*, int, RawHandle, RawHandle);
using ForeignAlltoallC = int (*)(const void*, std::int64_t, RawHandle, void*, std::int64_t,
                                 RawHandle, RawHandle);
using ForeignSplit = int (*)(RawHandle, int, int, void*);
using InitFn = int (*)(int*, char***);
using InitThreadFn = int (*)(int*, char***, int, int*);
using FinalizeFn = int (*)();

// Where the entry points hand calls on (core/mpi/stacking.h), resolved once.
// Null: mlxa2a serves the call. Under the other MPI family (foreign) every
// call with handles goes on bit-for-bit: the MPI_X entries to the next MPI_X,
// the PMPI_X ones to the MPI's own PMPI_X; Init and Finalize carry no handles,
// so a foreign shim still initialises (to say once that it stands aside).
struct HandOn {
  bool foreign = false;
  ForeignAlltoall alltoall = nullptr;
  ForeignAlltoallC alltoall_c = nullptr;
  ForeignSplit comm_split = nullptr;
  InitFn init = nullptr;
  InitThreadFn init_thread = nullptr;
  FinalizeFn finalize = nullptr;
  ForeignAlltoall pmpi_alltoall = nullptr;  // foreign only, as the ones below
  ForeignAlltoallC pmpi_alltoall_c = nullptr;
  ForeignSplit pmpi_comm_split = nullptr;
};

[[noreturn]] void missing(const char* name) {
  std::fprintf(stderr, "[mlxa2a] error: %s is not defined by this process's MPI\n", name);
  std::abort();
}

// Stand-ins for what a foreign shim cannot serve and the MPI does not define:
// so that the hot path tests one pointer.
int no_alltoall(const void*, int, RawHandle, void*, int, RawHandle, RawHandle) {
  missing("MPI_Alltoall");
}
int no_alltoall_c(const void*, std::int64_t, RawHandle, void*, std::int64_t, RawHandle,
                  RawHandle) {
  missing("MPI_Alltoall_c");
}
int no_comm_split(RawHandle, int, int, void*) { missing("MPI_Comm_split"); }

template <typename Fn>
void next_of(Fn* fn, const char* name, const char* pname, bool foreign, Fn absent = nullptr) {
  *fn = reinterpret_cast<Fn>(foreign ? dlsym(RTLD_NEXT, name) : next_tool_definition(name, pname));
  if (!*fn && foreign) *fn = absent;
}

template <typename Fn>
void own_of(Fn* fn, const char* pname, Fn absent) {
  *fn = reinterpret_cast<Fn>(mpi_own_symbol(pname));
  if (!*fn) *fn = absent;
}

// Resolved when the shim is loaded (as mpi_own(), core/mpi/stacking.h), so
// an entry point reads plain pointers.
constinit HandOn g_hand_on{};

__attribute__((constructor)) void resolve_hand_on() {
  HandOn& t = g_hand_on;
  t.foreign = !family_ok();
  next_of(&t.alltoall, "MPI_Alltoall", "PMPI_Alltoall", t.foreign, &no_alltoall);
  next_of(&t.alltoall_c, "MPI_Alltoall_c", "PMPI_Alltoall_c", t.foreign, &no_alltoall_c);
  next_of(&t.comm_split, "MPI_Comm_split", "PMPI_Comm_split", t.foreign, &no_comm_split);
  next_of(&t.init, "MPI_Init", "PMPI_Init", false);
  next_of(&t.init_thread, "MPI_Init_thread", "PMPI_Init_thread", false);
  next_of(&t.finalize, "MPI_Finalize", "PMPI_Finalize", false);
  if (t.foreign) {
    own_of(&t.pmpi_alltoall, "PMPI_Alltoall", &no_alltoall);
    own_of(&t.pmpi_alltoall_c, "PMPI_Alltoall_c", &no_alltoall_c);
    own_of(&t.pmpi_comm_split, "PMPI_Comm_split", &no_comm_split);
  }
}

int call(ForeignAlltoall fn, const RawAlltoallArgs& a) {
  return fn(a.sendbuf, static_cast<int>(a.sendcount), a.sendtype, a.recvbuf,
            static_cast<int>(a.recvcount), a.recvtype, a.comm);
}

int call(ForeignAlltoallC fn, const RawAlltoallArgs& a) {
  return fn(a.sendbuf, a.sendcount, a.sendtype, a.recvbuf, a.recvcount, a.recvtype, a.comm);
}

// Calls that entered PMPI_Alltoall[_c] on this thread: a call handed on to a
// tool that never comes back through it bypassed mlxa2a. initial-exec as
// ReentryGuard's (runtime.h).
constinit thread_local unsigned t_pmpi_entries __attribute__((tls_model("initial-exec"))) = 0;

template <typename Fn>
int call_tool(Fn fn, const RawAlltoallArgs& a, bool foreign) {
  if (foreign) return call(fn, a);
  const unsigned before = t_pmpi_entries;
  const int rc = call(fn, a);
  if (t_pmpi_entries == before) note_bypass(a.entry, reinterpret_cast<const void*>(fn));
  return rc;
}

AlltoallArgs args_of(const RawAlltoallArgs& a) {
  return {a.sendbuf, a.sendcount, from_raw<MPI_Datatype>(a.sendtype), a.recvbuf, a.recvcount,
          from_raw<MPI_Datatype>(a.recvtype), from_raw<MPI_Comm>(a.comm), a.large_count, a.entry};
}

// Out of line, so that its copy of the arguments takes no room in the frame
// of the inline path (a tail call from serve_alltoall).
[[gnu::noinline]] int dispatch_raw(const RawAlltoallArgs& a) {
  return detail::dispatch_alltoall(args_of(a));
}

// alltoall() (dispatch.h), with one copy of the arguments per path: the inline
// one then keeps them in registers instead of building them on the stack
// (callgrind: alltoall_entry 46 -> 20 instructions per pass-through call).
int serve_alltoall(const RawAlltoallArgs& a) {
  if (served_inline()) return serve_inline(args_of(a));
  return dispatch_raw(a);
}

// Out of line and cold, so that the usual path (no tool after mlxa2a) keeps
// no registers for this one (callgrind: alltoall_entry 35 -> 18 instructions
// per call, bench/results/fallthrough.md).
[[gnu::noinline, gnu::cold]] int hand_on_alltoall(ForeignAlltoall next,
                                                  const RawAlltoallArgs& a) noexcept {
  return call_tool(next, a, g_hand_on.foreign);
}

int serve_comm_split(RawHandle comm, int color, int key, void* newcomm) {
  return comm_split(from_raw<MPI_Comm>(comm), color, key, static_cast<MPI_Comm*>(newcomm));
}

}  // namespace

bool family_ok() noexcept {
  static const bool ok = [] {
    std::string found;
    return mpi_family_matches(&found);
  }();
  return ok;
}

unsigned pmpi_alltoall_entries() noexcept { return t_pmpi_entries; }

void refresh_fast_alltoall(bool pass_through) noexcept {
  const HandOn& h = g_hand_on;
  // The symbol mpi_own().alltoall was resolved from, taking raw handles.
  static const auto own = reinterpret_cast<RawAlltoallFn>(mpi_own_symbol("PMPI_Alltoall"));
  const bool fast = pass_through && !h.foreign && !h.alltoall && own;
  detail::g_fast_alltoall.store(fast ? own : nullptr, std::memory_order_relaxed);
}

int alltoall_entry(const RawAlltoallArgs& a) noexcept {
  if (const ForeignAlltoall next = g_hand_on.alltoall) [[unlikely]] return hand_on_alltoall(next, a);
  return serve_alltoall(a);
}

int alltoall_c_entry(const RawAlltoallArgs& a) noexcept {
  if (const ForeignAlltoallC next = g_hand_on.alltoall_c) return call_tool(next, a, g_hand_on.foreign);
  return serve_alltoall(a);
}

int pmpi_alltoall_entry(const RawAlltoallArgs& a) noexcept {
  ++t_pmpi_entries;
  if (!g_hand_on.foreign) [[likely]] return serve_alltoall(a);
  return a.large_count ? call(g_hand_on.pmpi_alltoall_c, a) : call(g_hand_on.pmpi_alltoall, a);
}

int comm_split_entry(RawHandle comm, int color, int key, void* newcomm) noexcept {
  if (g_hand_on.comm_split) return g_hand_on.comm_split(comm, color, key, newcomm);
  return serve_comm_split(comm, color, key, newcomm);
}

int pmpi_comm_split_entry(RawHandle comm, int color, int key, void* newcomm) noexcept {
  if (!g_hand_on.foreign) return serve_comm_split(comm, color, key, newcomm);
  return g_hand_on.pmpi_comm_split(comm, color, key, newcomm);
}

// A tool's MPI_Init normally reaches our PMPI_Init, which initialises mlxa2a;
// after_init() again on return is a no-op then, and initialises mlxa2a when
// the tool reached the MPI another way.
int init_entry(int* argc, char*** argv) noexcept {
  const HandOn& h = g_hand_on;
  if (!h.init) return init(argc, argv);
  const int rc = h.init(argc, argv);
  after_init(rc);
  return rc;
}

int init_thread_entry(int* argc, char*** argv, int required, int* provided) noexcept {
  const HandOn& h = g_hand_on;
  if (!h.init_thread) return init_thread(argc, argv, required, provided);
  const int rc = h.init_thread(argc, argv, required, provided);
  after_init(rc);
  return rc;
}

int pmpi_init_entry(int* argc, char*** argv) noexcept { return init(argc, argv); }

int pmpi_init_thread_entry(int* argc, char*** argv, int required, int* provided) noexcept {
  return init_thread(argc, argv, required, provided);
}

int finalize_entry() noexcept {
  return g_hand_on.finalize ? g_hand_on.finalize() : finalize();
}

}  // namespace mlxa2a::core::mpi
