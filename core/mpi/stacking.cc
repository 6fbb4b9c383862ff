#include "core/mpi/stacking.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "core/log.h"
#include "core/mpi/abi.h"

namespace mlxa2a::core::mpi {

namespace {

const void* object_base(const void* addr) {
  Dl_info info{};
  return addr && dladdr(addr, &info) ? info.dli_fbase : nullptr;
}

bool same_object(const void* a, const void* b) {
  const void* base = object_base(a);
  return base != nullptr && base == object_base(b);
}

// Whether addr lies in the object this code is linked into (the shim).
bool is_ours(const void* addr) {
  return same_object(addr, reinterpret_cast<const void*>(&object_of));
}

template <typename Fn>
void resolve(Fn* fn, const char* name) {
  *fn = reinterpret_cast<Fn>(mpi_own_symbol(name));
}

std::once_flag g_resolved;

void resolve_mpi_own() {
  std::call_once(g_resolved, [] {
    MpiOwn& t = detail::g_mpi_own;
    resolve(&t.alltoall, "PMPI_Alltoall");
    resolve(&t.comm_split, "PMPI_Comm_split");
    resolve(&t.init, "PMPI_Init");
    resolve(&t.init_thread, "PMPI_Init_thread");
    t.alltoall_c = mpi_own_symbol("PMPI_Alltoall_c");
  });
}

// Before any code of the program runs (no abort here: launchers and shells
// load the shim too).
__attribute__((constructor)) void resolve_at_load() { resolve_mpi_own(); }

}  // namespace

void* mpi_own_symbol(const char* name) noexcept {
  // RTLD_NEXT first: the MPI (or a tool that defines PMPI_X, standing in for
  // it) after the shim; RTLD_DEFAULT when the shim is not before the MPI in
  // the search order (loaded by dlopen, or linked after libmpi).
  for (void* handle : {RTLD_NEXT, RTLD_DEFAULT}) {
    void* sym = dlsym(handle, name);
    if (sym && !is_ours(sym)) return sym;
  }
  return nullptr;
}

namespace detail {
constinit MpiOwn g_mpi_own{};
}

void require_mpi_own() noexcept {
  resolve_mpi_own();
  const MpiOwn& t = detail::g_mpi_own;
  const std::pair<const void*, const char*> mandatory[] = {
      {reinterpret_cast<const void*>(t.alltoall), "PMPI_Alltoall"},
      {reinterpret_cast<const void*>(t.comm_split), "PMPI_Comm_split"},
      {reinterpret_cast<const void*>(t.init), "PMPI_Init"},
      {reinterpret_cast<const void*>(t.init_thread), "PMPI_Init_thread"}};
  for (const auto& [fn, name] : mandatory) {
    if (!fn) {
      std::fprintf(stderr, "[mlxa2a] error: %s is not defined by this process's MPI\n", name);
      std::abort();
    }
  }
}

void* next_tool_definition(const char* name, const char* pname) noexcept {
  void* next = dlsym(RTLD_NEXT, name);
  if (!next) return nullptr;
  // The MPI defines both names in one object (often at one address); a tool
  // defines the MPI name only and calls the profiling one.
  for (void* handle : {RTLD_NEXT, RTLD_DEFAULT}) {
    if (same_object(dlsym(handle, pname), next)) return nullptr;
  }
  return next;
}

std::string object_of(const void* addr) {
  Dl_info info{};
  if (!addr || !dladdr(addr, &info) || !info.dli_fname) return "?";
  // The main program's name is empty in its link map entry.
  return *info.dli_fname ? info.dli_fname : "the program";
}

std::string check_stacking() {
  void* entry = dlsym(RTLD_DEFAULT, "MPI_Alltoall");
  void* profiling = dlsym(RTLD_DEFAULT, "PMPI_Alltoall");
  void* tool_after = next_tool_definition("MPI_Alltoall", "PMPI_Alltoall");
  const bool entry_ours = is_ours(entry);
  if (is_ours(profiling)) {
    if (!entry_ours) {
      MLXA2A_LOG(Info,
                 "MPI_Alltoall comes from %s, loaded before mlxa2a; mlxa2a serves the calls it "
                 "passes to PMPI_Alltoall",
                 object_of(entry).c_str());
    } else if (tool_after) {
      MLXA2A_LOG(Info,
                 "MPI_Alltoall hands calls on to %s, loaded after mlxa2a; mlxa2a serves the calls "
                 "it passes to PMPI_Alltoall",
                 object_of(tool_after).c_str());
    }
    return {};
  }
  // PMPI_Alltoall is not ours: only our own MPI_Alltoall, when no tool comes
  // after it, surely reaches mlxa2a. The library that defines PMPI_Alltoall
  // may still pass calls on to ours (dlsym RTLD_NEXT): one empty call on
  // MPI_COMM_SELF tells. Inside MPI_Init mlxa2a's ReentryGuard is held, so
  // the call goes straight to the MPI if it reaches us.
  if (entry_ours && !tool_after) return {};
  using Alltoall = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
  char none = 0;
  const unsigned before = pmpi_alltoall_entries();
  reinterpret_cast<Alltoall>(profiling)(&none, 0, MPI_BYTE, &none, 0, MPI_BYTE, MPI_COMM_SELF);
  const std::string blocker = object_of(profiling);
  if (pmpi_alltoall_entries() != before) {
    MLXA2A_LOG(Info, "PMPI_Alltoall comes from %s, loaded before mlxa2a, which passes calls on to "
               "mlxa2a's", blocker.c_str());
    return {};
  }
  return "MPI_Alltoall resolves to " + object_of(entry) + " and PMPI_Alltoall to " + blocker +
         ", which passes calls to the MPI without mlxa2a: mlxa2a serves no MPI_Alltoall. "
         "Preload mlxa2a before " + blocker + " (LD_PRELOAD=\"libmlxa2a-*.so " + blocker + "\")";
}

void note_bypass(const char* entry, const void* tool_fn) noexcept {
  static std::atomic<bool> said{false};
  if (said.exchange(true, std::memory_order_relaxed)) return;
  try {
    const std::string tool = object_of(tool_fn);
    MLXA2A_LOG(Warn,
               "%s: %s, loaded after mlxa2a, passed the call to the MPI without mlxa2a's "
               "PMPI_Alltoall, so mlxa2a serves none of its calls; preload %s before mlxa2a",
               entry, tool.c_str(), tool.c_str());
  } catch (...) {
  }
}

}  // namespace mlxa2a::core::mpi
