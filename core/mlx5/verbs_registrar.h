// The registration cache's registrar on a verbs protection domain:
// rcache::Registrar (rcache/registrar.h) implemented with ibv_reg_mr /
// ibv_dereg_mr through the verbs symbol table (verbs.h). With a PD shared by
// the node (shared_pd.h) each rank registers its own buffers on the leader's
// PD, so the leader's work requests can gather from them with their lkeys.
//
// Contract
// * Borrows `v` and `pd`: both must outlive the registrar, and the registrar
//   must outlive every RegCache using it (rcache's rule).
// * register_memory passes the rcache access bits through unchanged (they are
//   the IBV_ACCESS_* values) and reports the MR's virtual address as the iova,
//   so Ref::key_for(ptr).addr is ptr itself; MemoryKey::handle holds the
//   ibv_mr*. A refusal returns false, keeps errno's text in last_error() and
//   counts it; nothing is logged here (the caller traces what it decides).
// * Thread-safe as far as rcache needs: it calls in under its own mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/mlx5/verbs.h"
#include "rcache/registrar.h"

namespace mlxa2a::mlx5 {

class VerbsRegistrar final : public rcache::Registrar {
 public:
  VerbsRegistrar(const Verbs& v, ibv_pd* pd) : v_(v), pd_(pd) {}
  bool register_memory(void* addr, std::size_t len, unsigned access,
                       rcache::MemoryKey* out) noexcept override;
  void deregister_memory(const rcache::MemoryKey& key) noexcept override;

  std::uint64_t registered() const { return registered_.load(std::memory_order_relaxed); }
  std::uint64_t deregistered() const { return deregistered_.load(std::memory_order_relaxed); }
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // strerror of the last refusal ("" if none). Not synchronised: read it
  // from the thread that saw the refusal.
  const std::string& last_error() const { return last_error_; }

 private:
  const Verbs& v_;
  ibv_pd* pd_;
  std::atomic<std::uint64_t> registered_{0};
  std::atomic<std::uint64_t> deregistered_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::string last_error_;
};

}  // namespace mlxa2a::mlx5
