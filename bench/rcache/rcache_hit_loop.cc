// Deterministic per-hit instruction counts for RegCache, for callgrind (wall times on
// a shared VM are noise; instruction counts are not):
//
//   valgrind --tool=callgrind --toggle-collect='hit_loop*' rcache_hit_loop same 100000
//   valgrind --tool=callgrind --toggle-collect='hit_loop*' rcache_hit_loop same 200000
//   Ir per hit = (Ir(200000) - Ir(100000)) / 100000       ("random": over 100k regions)
//
// Each iteration is what bench_rcache times: get + key_for + release of the Ref.
// Under valgrind membarrier(2) is unavailable, so the hit path's fences are real fences
// there (one extra instruction per get and per release compared with a native run).
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rcache/regcache.h"

namespace {

using namespace mlxa2a::rcache;

class NullRegistrar final : public Registrar {
 public:
  bool register_memory(void* addr, size_t, unsigned, MemoryKey* out) noexcept override {
    out->lkey = out->rkey = next_++;
    out->iova = reinterpret_cast<uintptr_t>(addr);
    return true;
  }
  void deregister_memory(const MemoryKey&) noexcept override {}

 private:
  uint32_t next_ = 1;
};

constexpr unsigned kAccess = kLocalWrite | kRemoteWrite;

// noinline: the function callgrind's --toggle-collect selects.
[[gnu::noinline]] uint32_t hit_loop(RegCache& cache, char* const* order, size_t mask, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const Ref ref = cache.get(order[i & mask], 128, kAccess);
    sum += ref.key_for(ref.addr()).lkey;
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "same") != 0 && std::strcmp(argv[1], "random") != 0)) {
    std::fprintf(stderr, "usage: %s same|random ITERATIONS\n", argv[0]);
    return 2;
  }
  const size_t regions = std::strcmp(argv[1], "random") == 0 ? 100000 : 1;
  const size_t n = std::strtoull(argv[2], nullptr, 10);
  NullRegistrar reg;
  Options o;
  o.max_regions = 0;
  o.max_bytes = 0;
  o.honour_memlock = false;
  std::string err;
  auto cache = RegCache::create(reg, o, &err);
  if (!cache) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  // 128-byte regions every 256 bytes, as in bench_rcache.
  const size_t bytes = regions * 256;
  auto* base = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (base == MAP_FAILED) return 1;
  for (size_t i = 0; i < regions; ++i) (void)cache->get(base + i * 256, 128, kAccess);
  std::vector<char*> order(size_t{1} << 16);
  std::mt19937_64 rng(42);
  for (auto& p : order) p = base + (rng() % regions) * 256;
  std::printf("%u\n", hit_loop(*cache, order.data(), order.size() - 1, n));
  const Stats s = cache->stats();
  cache.reset();
  munmap(base, bytes);
  return s.misses == regions ? 0 : 1;  // every timed get was a hit
}
