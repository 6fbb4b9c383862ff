#include "core/mlx5/verbs_registrar.h"

#include <cerrno>
#include <cstring>

#include "core/log.h"

namespace mlxa2a::mlx5 {

bool VerbsRegistrar::register_memory(void* addr, std::size_t len, unsigned access,
                                     rcache::MemoryKey* out) noexcept {
  errno = 0;
  ibv_mr* mr = v_.reg_mr(pd_, addr, len, static_cast<int>(access));
  if (!mr) {
    const int e = errno;
    refused_.fetch_add(1, std::memory_order_relaxed);
    try {
      last_error_ = e ? std::strerror(e) : "refused without errno";
    } catch (...) {  // out of memory for the message: the count still tells
    }
    return false;
  }
  // Never the registered start as a buffer address: the cache keeps
  // iova - start as the delta it adds to the user's own pointer.
  out->lkey = mr->lkey;
  out->rkey = mr->rkey;
  out->iova = reinterpret_cast<std::uintptr_t>(mr->addr);
  out->handle = mr;
  registered_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void VerbsRegistrar::deregister_memory(const rcache::MemoryKey& key) noexcept {
  auto* mr = static_cast<ibv_mr*>(key.handle);
  if (!mr) return;
  if (const int rc = v_.dereg_mr(mr); rc != 0) {
    MLXA2A_LOG(Warn, "ibv_dereg_mr (lkey 0x%x) failed (%s); the registration is leaked", key.lkey,
               std::strerror(rc > 0 ? rc : errno));
    return;
  }
  deregistered_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace mlxa2a::mlx5
