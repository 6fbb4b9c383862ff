// mlxa2a::rcache — the registrar seam.
//
// The cache is policy only: it never calls ibv_reg_mr itself. The engine passes a
// Registrar that wraps ibv_reg_mr/ibv_dereg_mr on its protection domain; tests pass a
// counting fake. Access bits carry the same values as IBV_ACCESS_* (verbs.h) so the
// production registrar can pass them through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mlxa2a::rcache {

// Same numeric values as enum ibv_access_flags (infiniband/verbs.h).
enum Access : unsigned {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
  kRemoteAtomic = 1u << 3,
};

// What a successful registration yields. `iova` is the address the NIC associates with
// the first registered byte (for an ordinary ibv_reg_mr it equals the virtual address;
// for a zero-based MR it would be 0). The cache translates user pointers through it and
// never exposes the registered start as a buffer address. `handle` is opaque to the
// cache (the engine keeps its ibv_mr* there).
struct MemoryKey {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t iova = 0;
  void* handle = nullptr;
};

// Contract for implementations:
//  * register_memory is called with the cache's internal mutex held, from whichever
//    thread missed; it may block (ibv_reg_mr does) and may allocate or unmap memory
//    (the unmap hooks never call back into the cache synchronously, so this is safe).
//    Returns false on failure; the cache then leaves nothing behind.
//  * deregister_memory is called exactly once per successful registration, also under
//    the mutex, never from inside an unmap hook. It must not fail loudly (log and go on).
//  * The registrar must outlive every RegCache that uses it.
class Registrar {
 public:
  virtual ~Registrar() = default;
  [[nodiscard]] virtual bool register_memory(void* addr, size_t len, unsigned access,
                                             MemoryKey* out) noexcept = 0;
  virtual void deregister_memory(const MemoryKey& key) noexcept = 0;
};

}  // namespace mlxa2a::rcache
