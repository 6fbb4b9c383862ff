// MPI_T performance variables: mlxa2a's counters (core/mpi/mpit.h).
#include <cstdint>
#include <iterator>
#include <mutex>
#include <new>
#include <string_view>
#include <unordered_map>

#include "core/mpi/call.h"
#include "core/mpi/counters.h"
#include "core/mpi/mpit.h"
#include "core/mpi/mpit_index.h"

namespace mlxa2a::core::mpi::mpit {
namespace {

struct Pvar {
  std::string_view name;
  std::string_view description;
  std::uint64_t (*read)();
};

// Path counts are the calling thread's (as MLXA2A_COLL_STATS's lines); the
// rest are the process's.
constexpr Pvar kPvars[] = {
    {"mlxa2a_calls_pmpi", "MPI_Alltoall calls this thread passed to the MPI's own",
     [] { return thread_path_counts().pmpi; }},
    {"mlxa2a_calls_shm",
     "MPI_Alltoall calls this thread served by mlxa2a's engine without RDMA (shared memory on "
     "one node, or hierarchically with the MPI between leaders)",
     [] { return thread_path_counts().shm; }},
    {"mlxa2a_calls_rdma",
     "MPI_Alltoall calls this thread served hierarchically with RDMA between leaders",
     [] { return thread_path_counts().rdma; }},
    {"mlxa2a_tuning_trials", "Trial calls of measured selection on this thread (also counted by path)",
     [] { return thread_path_counts().trials; }},
    {"mlxa2a_tuning_agreements", "Agreements of measured selection on this thread",
     [] { return thread_path_counts().agreements; }},
    {"mlxa2a_rdma_writes", "RDMA writes this process posted",
     [] { return rdma_counters().writes; }},
    {"mlxa2a_rdma_bytes", "Bytes this process wrote by RDMA",
     [] { return rdma_counters().bytes; }},
    {"mlxa2a_rdma_qps_created", "Queue pairs this process created",
     [] { return rdma_counters().qps_created; }},
    {"mlxa2a_node_bytes_copied", "Bytes the hierarchical engine copied on the node",
     [] { return zero_copy_stats().copied; }},
    {"mlxa2a_zcopy_bytes", "Bytes sent zero-copy from registered user buffers",
     [] { return zero_copy_stats().zero_copy; }},
    {"mlxa2a_zcopy_staged_fallbacks", "Zero-copy calls that were staged instead",
     [] { return zero_copy_stats().staged; }},
    {"mlxa2a_rcache_hits", "Registration cache hits", [] { return zero_copy_stats().hits; }},
    {"mlxa2a_rcache_misses", "Registration cache misses", [] { return zero_copy_stats().misses; }},
    {"mlxa2a_rcache_evictions", "Registration cache evictions",
     [] { return zero_copy_stats().evictions; }},
    {"mlxa2a_rcache_invalidations", "Registrations dropped because their memory was unmapped",
     [] { return zero_copy_stats().invalidations; }},
    {"mlxa2a_rcache_refused", "Registrations the device refused",
     [] { return zero_copy_stats().refused; }},
};
constexpr int kCount = static_cast<int>(std::size(kPvars));

struct PvarHandle {
  int ours;
  MPI_T_pvar_session session;
  std::uint64_t origin;  // the counter's value that reads as 0 on this handle
};

class Pvars {
 public:
  static Pvars& instance() {
    static Pvars* p = new Pvars;  // never destroyed: tools may call at exit
    return *p;
  }
  MpitIndexSpace& indices() { return indices_; }
  std::mutex& mutex() { return mutex_; }
  // Under mutex(): the live handles of ours.
  std::unordered_map<const void*, PvarHandle*>& handles() { return handles_; }

  PvarHandle* find(MPI_T_pvar_handle h) {
    const auto it = handles_.find(h);
    return it == handles_.end() ? nullptr : it->second;
  }

 private:
  Pvars() : indices_(kCount) {}
  MpitIndexSpace indices_;
  std::mutex mutex_;
  std::unordered_map<const void*, PvarHandle*> handles_;
};

int mpi_count(int* n) { return PMPI_T_pvar_get_num(n); }

std::uint64_t value(const PvarHandle& h) { return kPvars[h.ours].read() - h.origin; }

// Runs f on our handle `h` (under the mutex), or returns -1 when `h` is the
// MPI's (or MPI_T_PVAR_ALL_HANDLES) and the caller should hand it on.
template <class F>
int with_ours(MPI_T_pvar_session session, MPI_T_pvar_handle handle, F f) {
  Pvars& p = Pvars::instance();
  std::lock_guard lock(p.mutex());
  PvarHandle* h = p.find(handle);
  if (!h) return -1;
  if (h->session != session) return MPI_T_ERR_INVALID_HANDLE;
  return f(*h);
}

}  // namespace

int pvar_get_num(int* num) noexcept {
  int n = 0;
  const int rc = mpi_count(&n);
  if (rc != MPI_SUCCESS) return rc;
  *num = Pvars::instance().indices().count(n);
  return MPI_SUCCESS;
}

int pvar_get_info(int index, char* name, int* name_len, int* verbosity, int* var_class,
                  MPI_Datatype* datatype, MPI_T_enum* enumtype, char* desc, int* desc_len,
                  int* bind, int* readonly, int* continuous, int* atomic) noexcept {
  int n = 0;
  if (const int rc = mpi_count(&n); rc != MPI_SUCCESS) return rc;
  const MpitIndexSpace::Where w = Pvars::instance().indices().locate(index, n);
  if (w.index < 0) return MPI_T_ERR_INVALID_INDEX;
  if (!w.ours) {
    return PMPI_T_pvar_get_info(w.index, name, name_len, verbosity, var_class, datatype,
                                enumtype, desc, desc_len, bind, readonly, continuous, atomic);
  }
  const Pvar& v = kPvars[w.index];
  copy_out(v.name, name, name_len);
  copy_out(v.description, desc, desc_len);
  if (verbosity) *verbosity = MPI_T_VERBOSITY_USER_BASIC;
  if (var_class) *var_class = MPI_T_PVAR_CLASS_COUNTER;
  if (datatype) *datatype = MPI_UNSIGNED_LONG_LONG;
  if (enumtype) *enumtype = MPI_T_ENUM_NULL;
  if (bind) *bind = MPI_T_BIND_NO_OBJECT;
  if (readonly) *readonly = 0;  // a handle may be reset or written
  if (continuous) *continuous = 1;
  if (atomic) *atomic = 0;
  return MPI_SUCCESS;
}

int pvar_get_index(const char* name, int var_class, int* index) noexcept {
  if (!name || !index) return MPI_T_ERR_INVALID;
  int n = 0;
  if (const int rc = mpi_count(&n); rc != MPI_SUCCESS) return rc;
  MpitIndexSpace& space = Pvars::instance().indices();
  if (var_class == MPI_T_PVAR_CLASS_COUNTER) {
    for (int i = 0; i < kCount; ++i) {
      if (kPvars[i].name == name) {
        *index = space.view_of_ours(i, n);
        return MPI_SUCCESS;
      }
    }
  }
  int mpi = -1;
  const int rc = PMPI_T_pvar_get_index(name, var_class, &mpi);
  if (rc == MPI_SUCCESS) *index = space.view_of_mpi(mpi, n);
  return rc;
}

int pvar_session_free(MPI_T_pvar_session* session) noexcept {
  if (!session) return MPI_T_ERR_INVALID;
  Pvars& p = Pvars::instance();
  {
    std::lock_guard lock(p.mutex());
    for (auto it = p.handles().begin(); it != p.handles().end();) {
      if (it->second->session != *session) {
        ++it;
        continue;
      }
      delete it->second;
      it = p.handles().erase(it);
    }
  }
  return PMPI_T_pvar_session_free(session);
}

int pvar_handle_alloc(MPI_T_pvar_session session, int index, void* obj,
                      MPI_T_pvar_handle* handle, int* count) noexcept {
  int n = 0;
  if (const int rc = mpi_count(&n); rc != MPI_SUCCESS) return rc;
  Pvars& p = Pvars::instance();
  const MpitIndexSpace::Where w = p.indices().locate(index, n);
  if (w.index < 0) return MPI_T_ERR_INVALID_INDEX;
  if (!w.ours) return PMPI_T_pvar_handle_alloc(session, w.index, obj, handle, count);
  if (!handle || !count) return MPI_T_ERR_INVALID;
  if (session == MPI_T_PVAR_SESSION_NULL) return MPI_T_ERR_INVALID_SESSION;
  auto* h = new (std::nothrow) PvarHandle{w.index, session, 0};
  if (!h) return MPI_T_ERR_MEMORY;
  std::lock_guard lock(p.mutex());
  p.handles().emplace(h, h);
  *handle = reinterpret_cast<MPI_T_pvar_handle>(h);
  *count = 1;
  return MPI_SUCCESS;
}

int pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle* handle) noexcept {
  if (!handle) return MPI_T_ERR_INVALID;
  const int rc = with_ours(session, *handle, [&](PvarHandle& h) {
    Pvars::instance().handles().erase(&h);
    delete &h;
    *handle = MPI_T_PVAR_HANDLE_NULL;
    return MPI_SUCCESS;
  });
  return rc >= 0 ? rc : PMPI_T_pvar_handle_free(session, handle);
}

// Ours are continuous: there is nothing to start or stop. With
// MPI_T_PVAR_ALL_HANDLES the MPI's own handles are started or stopped.
int pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle) noexcept {
  const int rc = with_ours(session, handle, [](PvarHandle&) { return MPI_T_ERR_PVAR_NO_STARTSTOP; });
  return rc >= 0 ? rc : PMPI_T_pvar_start(session, handle);
}

int pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) noexcept {
  const int rc = with_ours(session, handle, [](PvarHandle&) { return MPI_T_ERR_PVAR_NO_STARTSTOP; });
  return rc >= 0 ? rc : PMPI_T_pvar_stop(session, handle);
}

int pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void* buf) noexcept {
  const int rc = with_ours(session, handle, [&](PvarHandle& h) {
    if (!buf) return static_cast<int>(MPI_T_ERR_INVALID);
    *static_cast<unsigned long long*>(buf) = value(h);
    return static_cast<int>(MPI_SUCCESS);
  });
  return rc >= 0 ? rc : PMPI_T_pvar_read(session, handle, buf);
}

int pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle, const void* buf) noexcept {
  const int rc = with_ours(session, handle, [&](PvarHandle& h) {
    if (!buf) return static_cast<int>(MPI_T_ERR_INVALID);
    // The handle reads the written value now and counts on from it.
    h.origin = kPvars[h.ours].read() - *static_cast<const unsigned long long*>(buf);
    return static_cast<int>(MPI_SUCCESS);
  });
  return rc >= 0 ? rc : PMPI_T_pvar_write(session, handle, buf);
}

int pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle) noexcept {
  if (handle == MPI_T_PVAR_ALL_HANDLES) {
    Pvars& p = Pvars::instance();
    {
      std::lock_guard lock(p.mutex());
      for (auto& [key, h] : p.handles()) {
        if (h->session == session) h->origin = kPvars[h->ours].read();
      }
    }
    return PMPI_T_pvar_reset(session, handle);
  }
  const int rc = with_ours(session, handle, [](PvarHandle& h) {
    h.origin = kPvars[h.ours].read();
    return static_cast<int>(MPI_SUCCESS);
  });
  return rc >= 0 ? rc : PMPI_T_pvar_reset(session, handle);
}

int pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void* buf) noexcept {
  const int rc = with_ours(session, handle, [&](PvarHandle& h) {
    if (!buf) return static_cast<int>(MPI_T_ERR_INVALID);
    const std::uint64_t now = kPvars[h.ours].read();
    *static_cast<unsigned long long*>(buf) = now - h.origin;
    h.origin = now;
    return static_cast<int>(MPI_SUCCESS);
  });
  return rc >= 0 ? rc : PMPI_T_pvar_readreset(session, handle, buf);
}

int category_get_pvars(int cat, int len, int indices[]) noexcept {
  const int rc = PMPI_T_category_get_pvars(cat, len, indices);
  if (rc != MPI_SUCCESS || !indices) return rc;
  int n = 0;
  int filled = 0;
  if (mpi_count(&n) != MPI_SUCCESS || category_sizes(cat, nullptr, &filled) != MPI_SUCCESS) {
    return rc;
  }
  MpitIndexSpace& space = Pvars::instance().indices();
  for (int i = 0; i < std::min(len, filled); ++i) indices[i] = space.view_of_mpi(indices[i], n);
  return rc;
}

}  // namespace mlxa2a::core::mpi::mpit
