// Registration cache micro-benchmarks: mlxa2a::rcache::RegCache against UCX's
// ucs_rcache (when built with libucx-dev), same cases, same fake registrar, one run.
//
//   ninja -C <build> bench/rcache/bench_rcache && <build>/bench/rcache/bench_rcache
//
// Names: BM_<case><Impl>/<args>, Impl = Ours or Ucx. Each get is followed by its release.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "rcache/regcache.h"

#ifdef MLXA2A_HAVE_UCX
extern "C" {
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>
}
#endif

namespace mlxa2a::rcache::bench {
namespace {

// Cheap fake shared by both caches: counts, hands out keys, touches no memory.
class CountingRegistrar final : public Registrar {
 public:
  bool register_memory(void* addr, size_t, unsigned, MemoryKey* out) noexcept override {
    ++live;
    ++total;
    out->lkey = next;
    out->rkey = next++;
    out->iova = reinterpret_cast<uintptr_t>(addr);
    return true;
  }
  void deregister_memory(const MemoryKey&) noexcept override { --live; }
  uint64_t live = 0, total = 0;
  uint32_t next = 1;
};

constexpr size_t kStride = 256;  // regions: 128 bytes every 256, never overlapping
constexpr size_t kLen = 128;

struct Arena {
  explicit Arena(size_t slots) : bytes(slots * kStride) {
    base = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  }
  ~Arena() { munmap(base, bytes); }
  char* slot(size_t i) const { return base + i * kStride; }
  size_t bytes;
  char* base;
};

// ---------------------------------------------------------------- adapters

struct Ours {
  static constexpr const char* kName = "Ours";
  using Handle = Ref;
  Ours(CountingRegistrar& reg, size_t max_regions) {
    Options o;
    o.max_regions = max_regions;
    o.max_bytes = 0;
    o.honour_memlock = false;
    std::string err;
    cache = RegCache::create(reg, o, &err);
    if (!cache) std::abort();
  }
  Ref get(void* p, size_t len) { return cache->get(p, len, kLocalWrite | kRemoteWrite); }
  static uint32_t key(const Ref& r) { return r.key_for(r.addr()).lkey; }
  static void put(Ref& r) { r.reset(); }
  std::unique_ptr<RegCache> cache;
};

#ifdef MLXA2A_HAVE_UCX
struct UcxRegion {
  ucs_rcache_region_t super;
  MemoryKey key;
};

ucs_status_t ucx_mem_reg(void* ctx, ucs_rcache_t*, void*, ucs_rcache_region_t* r, uint16_t) {
  auto* reg = static_cast<CountingRegistrar*>(ctx);
  auto* region = reinterpret_cast<UcxRegion*>(r);
  const bool ok = reg->register_memory(reinterpret_cast<void*>(r->super.start),
                                       r->super.end - r->super.start, kLocalWrite, &region->key);
  return ok ? UCS_OK : UCS_ERR_IO_ERROR;
}
void ucx_mem_dereg(void* ctx, ucs_rcache_t*, ucs_rcache_region_t* r) {
  static_cast<CountingRegistrar*>(ctx)->deregister_memory(reinterpret_cast<UcxRegion*>(r)->key);
}
void ucx_dump(void*, ucs_rcache_t*, ucs_rcache_region_t*, char* buf, size_t max) {
  if (max > 0) buf[0] = '\0';
}
const ucs_rcache_ops_t kUcxOps = {ucx_mem_reg, ucx_mem_dereg, ucx_dump};

struct Ucx {
  static constexpr const char* kName = "Ucx";
  struct Handle {
    ucs_rcache_region_t* region = nullptr;
  };
  Ucx(CountingRegistrar& reg, size_t max_regions) {
    ucs_rcache_params_t p{};
    p.region_struct_size = sizeof(UcxRegion);
    p.alignment = 16;  // UCS_PGT_ADDR_ALIGN: the same 16-byte rounding as ours
    p.max_alignment = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    p.ucm_events = UCM_EVENT_VM_UNMAPPED;
    p.ucm_event_priority = 1000;
    p.ops = &kUcxOps;
    p.context = &reg;
    p.flags = UCS_RCACHE_FLAG_NO_PFN_CHECK;
    p.max_regions = max_regions == 0 ? ULONG_MAX : max_regions;
    p.max_size = SIZE_MAX;
    p.max_unreleased = SIZE_MAX;
    if (ucs_rcache_create(&p, "bench", nullptr, &rc) != UCS_OK) std::abort();
  }
  ~Ucx() { ucs_rcache_destroy(rc); }
  Handle get(void* p, size_t len) {
    Handle h;
    if (ucs_rcache_get(rc, p, len, PROT_READ | PROT_WRITE, nullptr, &h.region) != UCS_OK) std::abort();
    return h;
  }
  static uint32_t key(const Handle& h) { return reinterpret_cast<UcxRegion*>(h.region)->key.lkey; }
  void put(Handle& h) { ucs_rcache_region_put(rc, h.region); }
  ucs_rcache_t* rc = nullptr;
};
#endif

template <class C>
void release(C& c, typename C::Handle& h) {
  if constexpr (std::is_same_v<C, Ours>) {
    Ours::put(h);
  } else {
    c.put(h);
  }
}

// ---------------------------------------------------------------- cases

// Same buffer, again and again (also run with 2 threads on the same buffer).
template <class C>
void BM_Hit(benchmark::State& state) {
  static CountingRegistrar* reg;
  static C* cache;
  static Arena* arena;
  if (state.thread_index() == 0) {
    reg = new CountingRegistrar;
    cache = new C(*reg, 0);
    arena = new Arena(64);
    auto h = cache->get(arena->slot(0), kLen);
    release(*cache, h);
  }
  for (auto _ : state) {
    auto h = cache->get(arena->slot(0), kLen);
    benchmark::DoNotOptimize(C::key(h));
    release(*cache, h);
  }
  if (state.thread_index() == 0) {
    delete cache;
    delete arena;
    delete reg;
  }
}

// Each thread its own buffer: the scaling case without shared cache lines.
template <class C>
void BM_HitOwnBuffer(benchmark::State& state) {
  static CountingRegistrar* reg;
  static C* cache;
  static Arena* arena;
  if (state.thread_index() == 0) {
    reg = new CountingRegistrar;
    cache = new C(*reg, 0);
    arena = new Arena(64);
  }
  // Pre-register under the start barrier's protection: thread 0 setup happens before.
  char* mine = nullptr;
  for (auto _ : state) {
    if (mine == nullptr) mine = arena->slot(static_cast<size_t>(state.thread_index()) * 16);
    auto h = cache->get(mine, kLen);
    benchmark::DoNotOptimize(C::key(h));
    release(*cache, h);
  }
  if (state.thread_index() == 0) {
    delete cache;
    delete arena;
    delete reg;
  }
}

// One hot buffer while N other regions are cached.
template <class C>
void BM_HitWithOthers(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  CountingRegistrar reg;
  Arena arena(n + 1);
  C cache(reg, 0);
  for (size_t i = 0; i <= n; ++i) {
    auto h = cache.get(arena.slot(i), kLen);
    release(cache, h);
  }
  char* hot = arena.slot(n / 2);
  for (auto _ : state) {
    auto h = cache.get(hot, kLen);
    benchmark::DoNotOptimize(C::key(h));
    release(cache, h);
  }
}

// Uniformly random cached region out of N (indices precomputed).
template <class C>
void BM_RandomHit(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  CountingRegistrar reg;
  Arena arena(n);
  C cache(reg, 0);
  for (size_t i = 0; i < n; ++i) {
    auto h = cache.get(arena.slot(i), kLen);
    release(cache, h);
  }
  std::vector<char*> order(1 << 16);
  std::mt19937_64 rng(42);
  for (auto& p : order) p = arena.slot(rng() % n);
  size_t i = 0;
  for (auto _ : state) {
    auto h = cache.get(order[i++ & (order.size() - 1)], kLen);
    benchmark::DoNotOptimize(C::key(h));
    release(cache, h);
  }
  if (reg.total != n) state.SkipWithError("random hits registered something");
}

// A new buffer every iteration. max_regions 0: the cache only grows; with a limit:
// every miss evicts.
template <class C>
void BM_Miss(benchmark::State& state) {
  const size_t max_regions = static_cast<size_t>(state.range(0));
  constexpr size_t kSlots = size_t{1} << 20;
  CountingRegistrar reg;
  Arena arena(kSlots);
  auto cache = std::make_unique<C>(reg, max_regions);
  size_t i = 0;
  for (auto _ : state) {
    if (i == kSlots) {
      state.PauseTiming();
      cache = std::make_unique<C>(reg, max_regions);
      i = 0;
      state.ResumeTiming();
    }
    auto h = cache->get(arena.slot(i++), kLen);
    benchmark::DoNotOptimize(C::key(h));
    release(*cache, h);
  }
}

// mmap a page, cache it, munmap it, then one hit elsewhere (which applies the event).
template <class C>
void BM_MunmapCached(benchmark::State& state) {
  CountingRegistrar reg;
  Arena arena(4);
  C cache(reg, 0);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (auto _ : state) {
    void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    auto h = cache.get(p, kLen);
    release(cache, h);
    munmap(p, page);
    auto hit = cache.get(arena.slot(0), kLen);
    benchmark::DoNotOptimize(C::key(hit));
    release(cache, hit);
  }
  if (reg.live > 2) state.SkipWithError("unmapped regions were not invalidated");
}

// The same without any cache: the syscall floor of the case above.
void BM_MunmapBaseline(benchmark::State& state) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (auto _ : state) {
    void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    benchmark::DoNotOptimize(p);
    munmap(p, page);
  }
}

#define RCACHE_CASES(C)                                                            \
  BENCHMARK_TEMPLATE(BM_Hit, C)->Threads(1)->Threads(2)->UseRealTime();            \
  BENCHMARK_TEMPLATE(BM_HitOwnBuffer, C)->Threads(1)->Threads(2)->UseRealTime();   \
  BENCHMARK_TEMPLATE(BM_HitWithOthers, C)->Arg(1000)->Arg(100000);                 \
  BENCHMARK_TEMPLATE(BM_RandomHit, C)->Arg(1000)->Arg(100000);                     \
  BENCHMARK_TEMPLATE(BM_Miss, C)->Arg(0)->Arg(1000);                               \
  BENCHMARK_TEMPLATE(BM_MunmapCached, C);

RCACHE_CASES(Ours)
#ifdef MLXA2A_HAVE_UCX
RCACHE_CASES(Ucx)
#endif
BENCHMARK(BM_MunmapBaseline);

}  // namespace
}  // namespace mlxa2a::rcache::bench

BENCHMARK_MAIN();
