// MPI_T control variables: mlxa2a's switches (core/mpi/mpit.h).
#include <climits>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>

#include "core/config/registry.h"
#include "core/config/switches.h"
#include "core/log.h"
#include "core/mpi/mpit.h"
#include "core/mpi/mpit_index.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi::mpit {
namespace {

using config::Spec;
using config::Type;

// Room for a text value (a tune table, a device list) and its NUL.
constexpr int kTextCount = 4096;

struct CvarHandle {
  int ours;  // index into the switch table
};

class Cvars {
 public:
  static Cvars& instance() {
    static Cvars* c = new Cvars;  // never destroyed: tools may call at exit
    return *c;
  }
  std::span<const Spec> specs() const { return specs_; }
  MpitIndexSpace& indices() { return indices_; }
  std::mutex& mutex() { return mutex_; }
  // Under mutex(): the values, loaded from the environment at first use.
  config::Registry& registry() { return registry_; }
  std::unordered_set<const void*>& handles() { return handles_; }

 private:
  Cvars()
      : specs_(config::all_switches()),
        indices_(static_cast<int>(specs_.size())),
        registry_(specs_) {
    registry_.load(config::process_environment());
  }
  std::span<const Spec> specs_;
  MpitIndexSpace indices_;
  std::mutex mutex_;
  config::Registry registry_;
  std::unordered_set<const void*> handles_;
};

bool fits_int(const Spec& s) { return s.min >= INT_MIN && s.max <= INT_MAX; }

MPI_Datatype datatype_of(const Spec& s) {
  switch (s.type) {
    case Type::Bool: return MPI_INT;
    case Type::Int: return fits_int(s) ? MPI_INT : MPI_COUNT;
    case Type::Size: return MPI_UNSIGNED_LONG_LONG;
    default: return MPI_CHAR;  // Enum, String, Devices, Tune: the canonical text
  }
}

int verbosity_of(const Spec& s) {
  switch (s.verbosity) {
    case config::Verbosity::User: return MPI_T_VERBOSITY_USER_BASIC;
    case config::Verbosity::Tuner: return MPI_T_VERBOSITY_TUNER_BASIC;
    default: return MPI_T_VERBOSITY_MPIDEV_BASIC;
  }
}

// What a tool may do: change it (each rank on its own), or only read it.
// All-equal switches are compared across ranks once, at MPI_Init, so a change
// later is never safe for them; they read as READONLY.
int scope_of(const Spec& s) {
  return s.runtime_writable ? MPI_T_SCOPE_LOCAL : MPI_T_SCOPE_READONLY;
}

int mpi_count(int* n) { return PMPI_T_cvar_get_num(n); }

// Our handle, or null when `h` is the MPI's. Caller holds the mutex.
const CvarHandle* ours(Cvars& c, MPI_T_cvar_handle h) {
  return c.handles().count(h) ? reinterpret_cast<const CvarHandle*>(h) : nullptr;
}

void read_value(const config::Registry::Entry& e, void* buf) {
  switch (e.spec->type) {
    case Type::Bool: *static_cast<int*>(buf) = std::get<bool>(e.value) ? 1 : 0; return;
    case Type::Int:
      if (fits_int(*e.spec)) *static_cast<int*>(buf) = static_cast<int>(std::get<std::int64_t>(e.value));
      else *static_cast<MPI_Count*>(buf) = static_cast<MPI_Count>(std::get<std::int64_t>(e.value));
      return;
    case Type::Size:
      *static_cast<unsigned long long*>(buf) = std::get<std::uint64_t>(e.value);
      return;
    default: {
      int len = kTextCount;
      copy_out(e.text, static_cast<char*>(buf), &len);
    }
  }
}

// A written value as the registry's text.
std::string written_text(const Spec& s, const void* buf) {
  switch (s.type) {
    case Type::Bool: return *static_cast<const int*>(buf) ? "1" : "0";
    case Type::Int:
      return std::to_string(fits_int(s) ? *static_cast<const int*>(buf)
                                        : static_cast<long long>(*static_cast<const MPI_Count*>(buf)));
    case Type::Size: return std::to_string(*static_cast<const unsigned long long*>(buf));
    default: {
      const char* text = static_cast<const char*>(buf);
      return std::string(text, strnlen(text, kTextCount));
    }
  }
}

}  // namespace

int cvar_get_num(int* num) noexcept {
  int n = 0;
  const int rc = mpi_count(&n);
  if (rc != MPI_SUCCESS) return rc;
  *num = Cvars::instance().indices().count(n);
  return MPI_SUCCESS;
}

int cvar_get_info(int index, char* name, int* name_len, int* verbosity, MPI_Datatype* datatype,
                  MPI_T_enum* enumtype, char* desc, int* desc_len, int* bind,
                  int* scope) noexcept {
  int n = 0;
  if (const int rc = mpi_count(&n); rc != MPI_SUCCESS) return rc;
  Cvars& c = Cvars::instance();
  const MpitIndexSpace::Where w = c.indices().locate(index, n);
  if (w.index < 0) return MPI_T_ERR_INVALID_INDEX;
  if (!w.ours) {
    return PMPI_T_cvar_get_info(w.index, name, name_len, verbosity, datatype, enumtype, desc,
                                desc_len, bind, scope);
  }
  const Spec& s = c.specs()[w.index];
  copy_out(std::string(config::kPrefix) + std::string(s.name), name, name_len);
  copy_out(s.description, desc, desc_len);
  if (verbosity) *verbosity = verbosity_of(s);
  if (datatype) *datatype = datatype_of(s);
  if (enumtype) *enumtype = MPI_T_ENUM_NULL;
  if (bind) *bind = MPI_T_BIND_NO_OBJECT;
  if (scope) *scope = scope_of(s);
  return MPI_SUCCESS;
}

int cvar_get_index(const char* name, int* index) noexcept {
  if (!name || !index) return MPI_T_ERR_INVALID;
  int n = 0;
  if (const int rc = mpi_count(&n); rc != MPI_SUCCESS) return rc;
  Cvars& c = Cvars::instance();
  const std::string_view want(name);
  if (want.substr(0, config::kPrefix.size()) == config::kPrefix) {
    for (std::size_t i = 0; i < c.specs().size(); ++i) {
      if (c.specs()[i].name == want.substr(config::kPrefix.size())) {
        *index = c.indices().view_of_ours(static_cast<int>(i), n);
        return MPI_SUCCESS;
      }
    }
  }
  int mpi = -1;
  const int rc = PMPI_T_cvar_get_index(name, &mpi);
  if (rc == MPI_SUCCESS) *index = c.indices().view_of_mpi(mpi, n);
  return rc;
}

int cvar_handle_alloc(int index, void* obj, MPI_T_cvar_handle* handle, int* count) noexcept {
  int n = 0;
  if (const int rc = mpi_count(&n); rc != MPI_SUCCESS) return rc;
  Cvars& c = Cvars::instance();
  const MpitIndexSpace::Where w = c.indices().locate(index, n);
  if (w.index < 0) return MPI_T_ERR_INVALID_INDEX;
  if (!w.ours) return PMPI_T_cvar_handle_alloc(w.index, obj, handle, count);
  if (!handle || !count) return MPI_T_ERR_INVALID;
  const Spec& s = c.specs()[w.index];
  auto* h = new (std::nothrow) CvarHandle{w.index};
  if (!h) return MPI_T_ERR_MEMORY;
  std::lock_guard lock(c.mutex());
  c.handles().insert(h);
  *handle = reinterpret_cast<MPI_T_cvar_handle>(h);
  *count = datatype_of(s) == MPI_CHAR ? kTextCount : 1;
  return MPI_SUCCESS;
}

int cvar_handle_free(MPI_T_cvar_handle* handle) noexcept {
  if (!handle) return MPI_T_ERR_INVALID;
  Cvars& c = Cvars::instance();
  {
    std::lock_guard lock(c.mutex());
    if (const CvarHandle* h = ours(c, *handle)) {
      c.handles().erase(h);
      delete h;
      *handle = MPI_T_CVAR_HANDLE_NULL;
      return MPI_SUCCESS;
    }
  }
  return PMPI_T_cvar_handle_free(handle);
}

int cvar_read(MPI_T_cvar_handle handle, void* buf) noexcept {
  Cvars& c = Cvars::instance();
  {
    std::lock_guard lock(c.mutex());
    if (const CvarHandle* h = ours(c, handle)) {
      if (!buf) return MPI_T_ERR_INVALID;
      read_value(c.registry().entries()[h->ours], buf);
      return MPI_SUCCESS;
    }
  }
  return PMPI_T_cvar_read(handle, buf);
}

int cvar_write(MPI_T_cvar_handle handle, const void* buf) noexcept {
  Cvars& c = Cvars::instance();
  {
    std::lock_guard lock(c.mutex());
    if (const CvarHandle* h = ours(c, handle)) {
      const Spec& s = c.specs()[h->ours];
      if (!s.runtime_writable) return MPI_T_ERR_CVAR_SET_NEVER;
      // Before MPI_Init the runtime would load the environment over it.
      const State st = Runtime::instance().state();
      if (st == State::Uninitialised || st == State::Finalised) return MPI_T_ERR_CVAR_SET_NOT_NOW;
      if (!buf) return MPI_T_ERR_INVALID;
      std::string why;
      if (!c.registry().set(s.name, written_text(s, buf), "MPI_T", &why)) {
        MLXA2A_LOG(Warn, "MPI_T write refused: %s", why.c_str());
        return MPI_T_ERR_INVALID;
      }
      Runtime::instance().apply_runtime_switches(c.registry());
      return MPI_SUCCESS;
    }
  }
  return PMPI_T_cvar_write(handle, buf);
}

int category_get_cvars(int cat, int len, int indices[]) noexcept {
  const int rc = PMPI_T_category_get_cvars(cat, len, indices);
  if (rc != MPI_SUCCESS || !indices) return rc;
  int n = 0;
  int filled = 0;
  if (mpi_count(&n) != MPI_SUCCESS || category_sizes(cat, &filled, nullptr) != MPI_SUCCESS) {
    return rc;
  }
  MpitIndexSpace& space = Cvars::instance().indices();
  for (int i = 0; i < std::min(len, filled); ++i) indices[i] = space.view_of_mpi(indices[i], n);
  return rc;
}

}  // namespace mlxa2a::core::mpi::mpit
