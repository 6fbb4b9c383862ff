#include "core/mlx5/verbs.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace mlxa2a::mlx5 {

namespace {

Verbs g_verbs;
const Verbs* g_loaded = nullptr;
char g_reason[256] = "";

template <class F>
bool bind(void* lib, const char* name, F& fn, bool required) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && required) {
    std::snprintf(g_reason, sizeof g_reason, "the verbs library lacks %s", name);
    return false;
  }
  return true;
}

void load(const char* library) {
  // RTLD_LOCAL: the symbols serve this table only and never interpose on a
  // verbs library the application or its MPI loads itself (same file: the
  // loader shares it).
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    std::snprintf(g_reason, sizeof g_reason, "%s not loadable: %s", library,
                  e ? e : "unknown error");
    return;
  }
  Verbs v;
  const bool ok = bind(lib, "ibv_get_device_list", v.get_device_list, true) &&
                  bind(lib, "ibv_free_device_list", v.free_device_list, true) &&
                  bind(lib, "ibv_get_device_name", v.get_device_name, true) &&
                  bind(lib, "ibv_open_device", v.open_device, true) &&
                  bind(lib, "ibv_close_device", v.close_device, true) &&
                  bind(lib, "ibv_query_device", v.query_device, true) &&
                  bind(lib, "ibv_query_port", v.query_port_compat, true) &&
                  bind(lib, "ibv_query_gid", v.query_gid, true) &&
                  bind(lib, "_ibv_query_gid_ex", v.query_gid_ex, false) &&
                  bind(lib, "ibv_query_pkey", v.query_pkey, true) &&
                  bind(lib, "ibv_read_sysfs_file", v.read_sysfs_file, false) &&
                  bind(lib, "ibv_alloc_pd", v.alloc_pd, true) &&
                  bind(lib, "ibv_dealloc_pd", v.dealloc_pd, true) &&
                  bind(lib, "ibv_reg_mr", v.reg_mr, true) &&
                  bind(lib, "ibv_dereg_mr", v.dereg_mr, true) &&
                  bind(lib, "ibv_create_cq", v.create_cq, true) &&
                  bind(lib, "ibv_destroy_cq", v.destroy_cq, true) &&
                  bind(lib, "ibv_create_qp", v.create_qp, true) &&
                  bind(lib, "ibv_modify_qp", v.modify_qp, true) &&
                  bind(lib, "ibv_destroy_qp", v.destroy_qp, true) &&
                  bind(lib, "ibv_wc_status_str", v.wc_status_str, false) &&
                  bind(lib, "ibv_query_qp", v.query_qp, false) &&
                  bind(lib, "ibv_get_async_event", v.get_async_event, false) &&
                  bind(lib, "ibv_ack_async_event", v.ack_async_event, false) &&
                  bind(lib, "ibv_event_type_str", v.event_type_str, false) &&
                  bind(lib, "ibv_resize_cq", v.resize_cq, false) &&
                  bind(lib, "ibv_import_device", v.import_device, false) &&
                  bind(lib, "ibv_import_pd", v.import_pd, false) &&
                  bind(lib, "ibv_unimport_pd", v.unimport_pd, false) &&
                  bind(lib, "ibv_is_fork_initialized", v.is_fork_initialized, false) &&
                  bind(lib, "ibv_create_srq", v.create_srq, false) &&
                  bind(lib, "ibv_destroy_srq", v.destroy_srq, false) &&
                  bind(lib, "ibv_create_ah", v.create_ah, false) &&
                  bind(lib, "ibv_destroy_ah", v.destroy_ah, false) &&
                  bind(lib, "ibv_qp_to_qp_ex", v.qp_to_qp_ex, false);
  if (!ok) return;  // lib stays open: harmless, and dlclose could race a user
  // libmlx5 from beside the verbs library when that was given as a path: a
  // provider binds to whatever libibverbs.so.1 is loaded, so a real libmlx5
  // next to a software libibverbs (tests) would call into the wrong library.
  std::string mlx5 = "libmlx5.so.1";
  if (const char* slash = std::strrchr(library, '/')) {
    mlx5 = std::string(library, static_cast<std::size_t>(slash - library + 1)) + mlx5;
  }
  if (void* dv = dlopen(mlx5.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    v.have_mlx5 = true;
    bind(dv, "mlx5dv_create_qp", v.dv_create_qp, false);
    bind(dv, "mlx5dv_qp_ex_from_ibv_qp_ex", v.dv_qp_ex, false);
  }
  g_verbs = v;
  g_loaded = &g_verbs;
}

}  // namespace

int Verbs::query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const noexcept {
  // What verbs.h's ___ibv_query_port does, minus its link-time reference.
  if (verbs_context* vctx = verbs_get_ctx_op(ctx, query_port)) {
    return vctx->query_port(ctx, port, attr, sizeof(*attr));
  }
  std::memset(attr, 0, sizeof(*attr));
  return query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

const Verbs* load_verbs(const char* library) noexcept {
  static std::once_flag once;
  std::call_once(once, load, library);
  return g_loaded;
}

const char* verbs_unavailable_reason() noexcept {
  return g_loaded ? "" : g_reason;
}

}  // namespace mlxa2a::mlx5
