// Shared helpers for the rcache tests.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "rcache/regcache.h"
#include "tests/rcache/fake_registrar.h"

namespace mlxa2a::rcache::test {

#define RCACHE_TEST_STR2(x) #x
#define RCACHE_TEST_STR(x) RCACHE_TEST_STR2(x)

inline Invalidation test_mode() {
  Invalidation m = Invalidation::kPatch;
  EXPECT_TRUE(parse_invalidation(RCACHE_TEST_STR(RCACHE_TEST_MODE), &m));
  return m;
}

inline size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

inline Options test_options(size_t align = 16) {
  Options o;
  o.alignment = align;
  o.honour_memlock = false;
  o.invalidation = test_mode();
  return o;
}

inline std::unique_ptr<RegCache> make_cache(FakeRegistrar& fake, const Options& o) {
  std::string err;
  auto cache = RegCache::create(fake, o, &err);
  EXPECT_NE(cache, nullptr) << err;
  return cache;
}

// Anonymous mapping owned by the test.
class Mapping {
 public:
  explicit Mapping(size_t len, void* at = nullptr)
      : len_(len),
        p_(static_cast<char*>(mmap(at, len, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0))) {
    if (p_ == MAP_FAILED) p_ = nullptr;
  }
  ~Mapping() { unmap(); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* get() const { return p_; }
  void unmap() {
    if (p_ != nullptr) munmap(p_, len_);
    p_ = nullptr;
  }
  void forget() { p_ = nullptr; }

 private:
  size_t len_;
  char* p_;
};

}  // namespace mlxa2a::rcache::test
