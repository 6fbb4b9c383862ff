#include "core/mlx5/zcopy_sender.h"

#include "core/mlx5/fork_watch.h"

namespace mlxa2a::mlx5 {

ZeroCopyCounters& zero_copy_counters() noexcept {
  static ZeroCopyCounters c;
  return c;
}

Status ZeroCopySender::create(const Verbs* v, GroupBootstrap& node, std::shared_ptr<Device> dev,
                              const SharedPdOptions& pd_opt, const rcache::Options& cache_opt,
                              std::unique_ptr<ZeroCopySender>* out, std::string* why) noexcept {
  out->reset();
  std::unique_ptr<SharedPd> pd;
  const Status st = SharedPd::setup(v, node, std::move(dev), pd_opt, &pd, why);
  if (st != Status::ok) return st;
  try {
    std::unique_ptr<ZeroCopySender> self(new ZeroCopySender);
    self->pd_ = std::move(pd);
    self->flush_on_fork_ = watch_forks(*v);
    self->forks_seen_ = fork_generation();
    self->registrar_ = std::make_unique<VerbsRegistrar>(*v, self->pd_->pd());
    std::string error;
    self->cache_ = rcache::RegCache::create(*self->registrar_, cache_opt, &error);
    if (!self->cache_) {
      *why = "member " + std::to_string(node.rank()) + ": registration cache: " + error;
      return Status::unavailable;
    }
    *out = std::move(self);
    return Status::ok;
  } catch (...) {
    *why = "member " + std::to_string(node.rank()) + ": out of memory";
    return Status::unavailable;
  }
}

ZeroCopySender::~ZeroCopySender() {
  held_.reset();
  cache_.reset();  // deregisters everything while the PD is still imported
}

bool ZeroCopySender::acquire(const void* p, std::size_t len, hier::GatherSource* out) noexcept {
  held_.reset();
  if (const std::uint64_t f = fork_generation(); f != forks_seen_) [[unlikely]] {
    // This process forked since the last call: its cached MRs may name
    // pages the child now shares (fork_watch.h). Nothing is held here.
    forks_seen_ = f;
    if (flush_on_fork_) cache_->purge();
  }
  try {
    // LOCAL_WRITE although the NIC only reads: it makes the kernel pin the
    // pages for writing, breaking copy-on-write and replacing the shared
    // zero page first; a read-only pin could keep a page the process later
    // stops using (stale bytes sent, docs/zerocopy.md). A read-only buffer
    // is then refused and staged.
    held_ = cache_->get(p, len, rcache::kLocalWrite);
  } catch (...) {  // the cache's slow path allocates
    held_.reset();
  }
  count();
  if (!held_) return false;
  const rcache::KeyInfo k = held_.key_for(p);
  if (!k.valid) {
    held_.reset();
    return false;
  }
  *out = hier::GatherSource{k.addr, k.lkey, 0};
  return true;
}

void ZeroCopySender::count() noexcept {
  ZeroCopyCounters& c = zero_copy_counters();
  const rcache::Stats s = cache_->stats();
  const std::uint64_t registered = registrar_->registered();
  const std::uint64_t refused = registrar_->refused();
  // A get that registered nothing new and was not refused was a hit.
  const std::uint64_t new_regs = registered - registered_seen_;
  const std::uint64_t new_refusals = refused - refused_seen_;
  if (held_ && new_regs == 0) c.hits.fetch_add(1, std::memory_order_relaxed);
  c.misses.fetch_add(s.misses - seen_.misses, std::memory_order_relaxed);
  c.evictions.fetch_add(s.evictions - seen_.evictions, std::memory_order_relaxed);
  c.invalidations.fetch_add(s.invalidations - seen_.invalidations, std::memory_order_relaxed);
  c.refused.fetch_add(new_refusals, std::memory_order_relaxed);
  seen_ = s;
  registered_seen_ = registered;
  refused_seen_ = refused;
}

}  // namespace mlxa2a::mlx5
