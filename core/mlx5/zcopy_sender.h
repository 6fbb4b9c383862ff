// A rank's side of zero-copy (docs/zerocopy.md): the node's shared PD
// (shared_pd.h), a VerbsRegistrar on it and this rank's RegCache, behind the
// hierarchical engine's SendRegistration (core/hier/zero_copy.h).
//
// Contract
// * create() is collective over the node's GroupBootstrap (SharedPd::setup's
//   two allgathers on every member whatever happens locally). On the leader
//   `dev` is its EndpointPool's device (null if it has none: the node then
//   agrees on unavailable). The result is the node's agreed SharedPd result,
//   or unavailable when this rank's cache cannot be built (*why says which
//   member and what); the caller must agree on it across the team.
// * acquire() takes a Ref on the send buffer (access LOCAL_WRITE, so the
//   kernel pins private writable pages, docs/zerocopy.md; read-only memory
//   is refused and staged), fills the GatherSource from
//   Ref::key_for(p) - the user's pointer, never the region - and keeps the
//   Ref until release(). Cache and registrar counters go to the process-wide
//   ZeroCopyCounters at each acquire.
// * Destruction: the held Ref, the cache (deregisters), the registrar, then
//   the SharedPd (unimports), in that order. Not thread-safe (one team).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/bootstrap.h"
#include "core/hier/zero_copy.h"
#include "core/mlx5/shared_pd.h"
#include "core/mlx5/verbs_registrar.h"
#include "rcache/regcache.h"

namespace mlxa2a::mlx5 {

struct ZeroCopyCounters {
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> invalidations{0};
  std::atomic<std::uint64_t> refused{0};
};
ZeroCopyCounters& zero_copy_counters() noexcept;

class ZeroCopySender final : public hier::SendRegistration {
 public:
  static Status create(const Verbs* v, GroupBootstrap& node, std::shared_ptr<Device> dev,
                       const SharedPdOptions& pd_opt, const rcache::Options& cache_opt,
                       std::unique_ptr<ZeroCopySender>* out, std::string* why) noexcept;
  ~ZeroCopySender() override;
  ZeroCopySender(const ZeroCopySender&) = delete;
  ZeroCopySender& operator=(const ZeroCopySender&) = delete;

  bool acquire(const void* p, std::size_t len, hier::GatherSource* out) noexcept override;
  void release() noexcept override { held_.reset(); }

 private:
  ZeroCopySender() = default;
  void count() noexcept;

  bool flush_on_fork_ = true;      // fork_watch.h: this library needs it
  std::uint64_t forks_seen_ = 0;   // fork_generation() at the last acquire
  // Declared in construction order; destroyed in reverse.
  std::unique_ptr<SharedPd> pd_;
  std::unique_ptr<VerbsRegistrar> registrar_;
  std::unique_ptr<rcache::RegCache> cache_;
  rcache::Ref held_;
  rcache::Stats seen_;  // the cache's counters at the last count()
  std::uint64_t registered_seen_ = 0;
  std::uint64_t refused_seen_ = 0;
};

}  // namespace mlxa2a::mlx5
