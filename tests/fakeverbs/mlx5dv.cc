// fakeverbs: the fake libmlx5.so.1 -- the mlx5 direct-verbs calls the engine
// uses.  It reports a plain ConnectX-6 with none of the optional extensions
// fakeverbs does not model (UMR, device memory, striding RQ...): an engine
// asking gets "absent" and takes its portable path, which is what it must
// also do on such hardware.  DC queue pairs (mlx5dv_create_qp with
// MLX5DV_QP_INIT_ATTR_MASK_DC) are modelled, by the fake libibverbs this
// library links to (dc.cc, FIDELITY.md "DC").
#include <infiniband/mlx5dv.h>

#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define FV_EXPORT extern "C" __attribute__((visibility("default")))

FV_EXPORT bool mlx5dv_is_supported(ibv_device* device) {
  return device && strncmp(device->name, "mlx5_", 5) == 0;
}

FV_EXPORT int mlx5dv_query_device(ibv_context* ctx, mlx5dv_context* attrs) {
  if (!ctx || !attrs || !mlx5dv_is_supported(ctx->device)) return EOPNOTSUPP;
  // comp_mask in: fields the caller wants; out: fields filled.  None of the
  // optional fields is modelled, so the answer is 0 and they stay untouched.
  attrs->version = 1;
  attrs->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1 | MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED |
                 MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW | MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP |
                 MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD;
  attrs->comp_mask = 0;
  return 0;
}

// The fake libibverbs' DC (dc.cc): from the libibverbs.so.1 beside this
// library, by path - a process may hold a real libibverbs.so.1 too (its MPI's),
// which a link-time dependency would bind to.
namespace {

void* fake_verbs_symbol(const char* name) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&fake_verbs_symbol), &info) || !info.dli_fname) {
    return nullptr;
  }
  std::string path(info.dli_fname);
  path = path.substr(0, path.rfind('/') + 1) + "libibverbs.so.1";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // already loaded: its handle
  return lib ? dlsym(lib, name) : nullptr;
}

template <class F>
F fake(const char* name) {
  static F fn = reinterpret_cast<F>(fake_verbs_symbol(name));
  return fn;
}

}  // namespace

FV_EXPORT ibv_qp* mlx5dv_create_qp(ibv_context* ctx, ibv_qp_init_attr_ex* qp_attr,
                                   mlx5dv_qp_init_attr* mlx5_qp_attr) {
  if (!ctx || !mlx5dv_is_supported(ctx->device)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  using Create = ibv_qp* (*)(ibv_context*, ibv_qp_init_attr_ex*, mlx5dv_qp_init_attr*);
  Create create = fake<Create>("fakeverbs_dc_create_qp");
  if (!create) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return create(ctx, qp_attr, mlx5_qp_attr);
}

FV_EXPORT mlx5dv_qp_ex* mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex* qp) {
  using Ex = mlx5dv_qp_ex* (*)(ibv_qp_ex*);
  Ex ex = fake<Ex>("fakeverbs_dv_qp_ex");
  return ex ? ex(qp) : nullptr;
}

FV_EXPORT __attribute__((noreturn)) void fakeverbs_unimplemented(const char* name) {
  fprintf(stderr, "fakeverbs: %s is not implemented by the fake libmlx5; "
                  "add it (tests/fakeverbs/FIDELITY.md)\n", name);
  abort();
}
