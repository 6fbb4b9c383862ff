// MPI_T: mlxa2a's switches as control variables, its counters as performance
// variables (docs/mpit.md). The shim's MPI_T_* entry points (shim/entry_mpit.cc)
// land here; what is not ours goes to the MPI's own PMPI_T_*.
//
// Indices: ours follow the MPI's own (core/mpi/mpit_index.h), so a tool that
// cached the MPI's indices keeps them. Handles: ours are objects of this
// module, told apart from the MPI's by a registry of the live ones.
//
// Control variables are read from the switch registry (loaded from the
// environment at the first MPI_T call); the runtime-writable ones
// (Spec::runtime_writable) may be written after MPI_Init and the next call
// follows them. Performance variables are continuous counters: no start or
// stop, and each handle may be reset or written (it then counts from there).
// Thread safety: every function may be called from any thread.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace mlxa2a::core::mpi::mpit {

int cvar_get_num(int* num) noexcept;
int cvar_get_info(int index, char* name, int* name_len, int* verbosity, MPI_Datatype* datatype,
                  MPI_T_enum* enumtype, char* desc, int* desc_len, int* bind,
                  int* scope) noexcept;
int cvar_get_index(const char* name, int* index) noexcept;
int cvar_handle_alloc(int index, void* obj, MPI_T_cvar_handle* handle, int* count) noexcept;
int cvar_handle_free(MPI_T_cvar_handle* handle) noexcept;
int cvar_read(MPI_T_cvar_handle handle, void* buf) noexcept;
int cvar_write(MPI_T_cvar_handle handle, const void* buf) noexcept;
int category_get_cvars(int cat, int len, int indices[]) noexcept;

int pvar_get_num(int* num) noexcept;
int pvar_get_info(int index, char* name, int* name_len, int* verbosity, int* var_class,
                  MPI_Datatype* datatype, MPI_T_enum* enumtype, char* desc, int* desc_len,
                  int* bind, int* readonly, int* continuous, int* atomic) noexcept;
int pvar_get_index(const char* name, int var_class, int* index) noexcept;
int pvar_session_free(MPI_T_pvar_session* session) noexcept;
int pvar_handle_alloc(MPI_T_pvar_session session, int index, void* obj,
                      MPI_T_pvar_handle* handle, int* count) noexcept;
int pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle* handle) noexcept;
int pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle) noexcept;
int pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) noexcept;
int pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void* buf) noexcept;
int pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle, const void* buf) noexcept;
int pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle) noexcept;
int pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void* buf) noexcept;
int category_get_pvars(int cat, int len, int indices[]) noexcept;

// How many control and performance variables the MPI's category `cat` holds
// (either pointer may be null).
inline int category_sizes(int cat, int* cvars, int* pvars) noexcept {
  int name_len = 0, desc_len = 0, num_cvars = 0, num_pvars = 0, num_categories = 0;
  const int rc = PMPI_T_category_get_info(cat, nullptr, &name_len, nullptr, &desc_len,
                                          &num_cvars, &num_pvars, &num_categories);
  if (cvars) *cvars = num_cvars;
  if (pvars) *pvars = num_pvars;
  return rc;
}

// MPI_T's string convention: *len is the buffer's size on input (0 or a null
// buffer: only the size needed, NUL included, is returned); the copy is cut to
// fit and NUL-terminated, and *len is what was stored, NUL included.
inline void copy_out(std::string_view src, char* dst, int* len) noexcept {
  if (!len) return;
  if (!dst || *len <= 0) {
    *len = static_cast<int>(src.size()) + 1;
    return;
  }
  const std::size_t n = std::min(src.size(), static_cast<std::size_t>(*len - 1));
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
  *len = static_cast<int>(n) + 1;
}

}  // namespace mlxa2a::core::mpi::mpit
