// fakeverbs: the fake libmlx5.so.1 -- the mlx5 direct-verbs calls the engine
// uses to detect optional accelerations.  It reports a plain ConnectX-6 with
// none of the optional extensions (DC, UMR, device memory, striding RQ...),
// because fakeverbs models none of them: an engine asking gets "absent" and
// takes its portable path, which is what it must also do on such hardware.
#include <infiniband/mlx5dv.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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

FV_EXPORT __attribute__((noreturn)) void fakeverbs_unimplemented(const char* name) {
  fprintf(stderr, "fakeverbs: %s is not implemented by the fake libmlx5; "
                  "add it (tests/fakeverbs/FIDELITY.md)\n", name);
  abort();
}
