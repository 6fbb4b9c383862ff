// Patch mode's integrity check (docs/rcache.md, "Coexistence guard"): when someone
// overwrites our jump in a libc entry point, the next miss notices, flushes every cache
// (events may have been lost) and, with no libucm to fall back to, stops caching.
// Runs in a child process: the loss is permanent for the process that sees it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/rcache/test_util.h"

namespace mlxa2a::rcache::test {
namespace {

// What a third party's hook might do: unmap without telling us.
int silent_munmap(void* addr, size_t len) { return static_cast<int>(syscall(SYS_munmap, addr, len)); }

// Overwrites the start of libc's munmap with `movabs $to,%r11; jmp *%r11`, as another
// patcher loaded after us would.
bool repatch_libc_munmap(void* to) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  auto* fn = libc == nullptr ? nullptr : static_cast<uint8_t*>(dlsym(libc, "munmap"));
  if (fn == nullptr) return false;
  uint8_t code[13] = {0x49, 0xBB, 0, 0, 0, 0, 0, 0, 0, 0, 0x41, 0xFF, 0xE3};
  const auto dest = reinterpret_cast<uint64_t>(to);
  std::memcpy(code + 2, &dest, sizeof dest);
  const uintptr_t first = reinterpret_cast<uintptr_t>(fn) & ~(page() - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(fn) + sizeof code + page() - 1) & ~(page() - 1);
  auto* start = reinterpret_cast<void*>(first);
  if (mprotect(start, last - first, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return false;
  std::memcpy(fn, code, sizeof code);
  __builtin___clear_cache(reinterpret_cast<char*>(fn), reinterpret_cast<char*>(fn + sizeof code));
  return mprotect(start, last - first, PROT_READ | PROT_EXEC) == 0;
}

// The child's whole run; the exit status says which step failed.
int overwritten_patch_scenario() {
  auto fail = [](int code, const char* what) {
    std::fprintf(stderr, "step %d: %s\n", code, what);
    return code;
  };
  FakeRegistrar fake;
  std::string err;
  auto cache = RegCache::create(fake, test_options(), &err);
  if (cache == nullptr) return fail(1, err.c_str());
  Mapping m(2 * page());
  uint32_t key = 0;
  {
    Ref r = cache->get(m.get(), page(), kLocalWrite);
    key = r.lkey();
  }
  if (!repatch_libc_munmap(reinterpret_cast<void*>(&silent_munmap))) return fail(2, "repatch failed");
  m.unmap();  // through the third party's hook: no event reaches us
  if (!fake.is_live(key)) return fail(3, "region dropped without an event?");
  std::vector<char> other(256);
  Ref r = cache->get(other.data(), other.size(), kLocalWrite);  // a miss: the slow path checks
  if (!r) return fail(4, "get failed");
  const Stats s = cache->stats();
  if (s.flushes != 1) return fail(5, "no flush after the patch was overwritten");
  if (fake.is_live(key)) return fail(6, "region of the silently unmapped memory survived");
  if (s.regions != 0 || s.uncached != 1) return fail(7, "still caching without a mechanism");
  Ref again = cache->get(other.data(), other.size(), kLocalWrite);
  if (cache->stats().uncached != 2) return fail(8, "a later get was served from a cache");
  return 0;
}

TEST(RcachePatchIntegrity, OverwrittenPatchFlushesAndStopsCaching) {
  if (test_mode() != Invalidation::kPatch) GTEST_SKIP() << "patch mode only";
  EXPECT_EXIT(std::_Exit(overwritten_patch_scenario()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace mlxa2a::rcache::test
