// MPI_T entry points (core/mpi/mpit.h): mlxa2a's switches and counters join
// the MPI's own control and performance variables. Unlike entry_c.cc this file
// includes <mpi.h>: MPI_T's handles and datatypes are the MPI's types, and the
// prototypes must be exactly its own. Functions not defined here (init,
// finalize, sessions' creation, enums, categories' own listing) are the MPI's.
#include <mpi.h>

#include "core/mpi/mpit.h"

namespace t = mlxa2a::core::mpi::mpit;

#define MLXA2A_EXPORT extern "C" __attribute__((visibility("default")))

MLXA2A_EXPORT int MPI_T_cvar_get_num(int* num_cvar) { return t::cvar_get_num(num_cvar); }
MLXA2A_EXPORT int MPI_T_cvar_get_info(int cvar_index, char* name, int* name_len, int* verbosity,
                                      MPI_Datatype* datatype, MPI_T_enum* enumtype, char* desc,
                                      int* desc_len, int* bind, int* scope) {
  return t::cvar_get_info(cvar_index, name, name_len, verbosity, datatype, enumtype, desc,
                          desc_len, bind, scope);
}
MLXA2A_EXPORT int MPI_T_cvar_get_index(const char* name, int* cvar_index) {
  return t::cvar_get_index(name, cvar_index);
}
MLXA2A_EXPORT int MPI_T_cvar_handle_alloc(int cvar_index, void* obj_handle,
                                          MPI_T_cvar_handle* handle, int* count) {
  return t::cvar_handle_alloc(cvar_index, obj_handle, handle, count);
}
MLXA2A_EXPORT int MPI_T_cvar_handle_free(MPI_T_cvar_handle* handle) {
  return t::cvar_handle_free(handle);
}
MLXA2A_EXPORT int MPI_T_cvar_read(MPI_T_cvar_handle handle, void* buf) {
  return t::cvar_read(handle, buf);
}
MLXA2A_EXPORT int MPI_T_cvar_write(MPI_T_cvar_handle handle, const void* buf) {
  return t::cvar_write(handle, buf);
}
MLXA2A_EXPORT int MPI_T_category_get_cvars(int cat_index, int len, int indices[]) {
  return t::category_get_cvars(cat_index, len, indices);
}
MLXA2A_EXPORT int MPI_T_category_get_pvars(int cat_index, int len, int indices[]) {
  return t::category_get_pvars(cat_index, len, indices);
}
MLXA2A_EXPORT int MPI_T_pvar_get_num(int* num_pvar) { return t::pvar_get_num(num_pvar); }
MLXA2A_EXPORT int MPI_T_pvar_get_info(int pvar_index, char* name, int* name_len, int* verbosity,
                                      int* var_class, MPI_Datatype* datatype,
                                      MPI_T_enum* enumtype, char* desc, int* desc_len, int* bind,
                                      int* readonly, int* continuous, int* atomic) {
  return t::pvar_get_info(pvar_index, name, name_len, verbosity, var_class, datatype, enumtype,
                          desc, desc_len, bind, readonly, continuous, atomic);
}
MLXA2A_EXPORT int MPI_T_pvar_get_index(const char* name, int var_class, int* pvar_index) {
  return t::pvar_get_index(name, var_class, pvar_index);
}
MLXA2A_EXPORT int MPI_T_pvar_session_free(MPI_T_pvar_session* session) {
  return t::pvar_session_free(session);
}
MLXA2A_EXPORT int MPI_T_pvar_handle_alloc(MPI_T_pvar_session session, int pvar_index,
                                          void* obj_handle, MPI_T_pvar_handle* handle,
                                          int* count) {
  return t::pvar_handle_alloc(session, pvar_index, obj_handle, handle, count);
}
MLXA2A_EXPORT int MPI_T_pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle* handle) {
  return t::pvar_handle_free(session, handle);
}
MLXA2A_EXPORT int MPI_T_pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  return t::pvar_start(session, handle);
}
MLXA2A_EXPORT int MPI_T_pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  return t::pvar_stop(session, handle);
}
MLXA2A_EXPORT int MPI_T_pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle handle,
                                  void* buf) {
  return t::pvar_read(session, handle, buf);
}
MLXA2A_EXPORT int MPI_T_pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle,
                                   const void* buf) {
  return t::pvar_write(session, handle, buf);
}
MLXA2A_EXPORT int MPI_T_pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  return t::pvar_reset(session, handle);
}
MLXA2A_EXPORT int MPI_T_pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle,
                                       void* buf) {
  return t::pvar_readreset(session, handle, buf);
}
