#include "rcache/libc_patch.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdarg>
#include <cstdint>
#include <iterator>
#include <cstring>
#include <mutex>

#include "rcache/unmap_events.h"

namespace mlxa2a::rcache::detail {
namespace {

// Each libc entry point gets a 5-byte relative jump (E9 rel32) to a stub near libc
// that jumps on to the hook (movabs $hook, %r11 ; jmp *%r11). Only the first 5 bytes
// change, written with one aligned 8-byte atomic store: a thread blocked inside the
// function's system call (madvise of a large range can take long) returns to an
// offset past them and finishes the original code. A 13-byte absolute jump written
// in place, as before, covered that return address: such a thread resumed in the
// middle of the new instruction and crashed (SIGSEGV in madvise, seen when a thread
// created the first cache while others freed memory).
constexpr size_t kPatchLen = 8;   // the aligned word the jump is stored in
constexpr size_t kRelJumpLen = 5;  // E9 rel32
constexpr size_t kStubLen = 16;   // 13 bytes of code, padded
uintptr_t page_size() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }
uintptr_t page_up(uintptr_t v) { return (v + page_size() - 1) & ~(page_size() - 1); }

// ---- replacements: publish first (the memory is still there), then the system call.
// They use syscall(2), never the patched functions, and touch no lock and no heap.

void* hook_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  // MAP_FIXED silently replaces whatever was mapped there.
  if ((flags & MAP_FIXED) != 0) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    publish_unmap(a, a + page_up(len));
  }
  return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}

int hook_munmap(void* addr, size_t len) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  publish_unmap(a, a + page_up(len));
  return static_cast<int>(syscall(SYS_munmap, addr, len));
}

// Variadic in glibc; on x86_64 the optional 5th argument arrives in %r8 either way and
// is only read by the kernel when MREMAP_FIXED is set.
void* hook_mremap(void* old_addr, size_t old_len, size_t new_len, int flags, void* new_addr) {
  const auto a = reinterpret_cast<uintptr_t>(old_addr);
  publish_unmap(a, a + page_up(old_len));  // conservative: growth in place too
  if ((flags & MREMAP_FIXED) != 0) {
    const auto n = reinterpret_cast<uintptr_t>(new_addr);
    publish_unmap(n, n + page_up(new_len));
  }
  return reinterpret_cast<void*>(syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr));
}

int hook_madvise(void* addr, size_t len, int advice) {
  // These drop the pages: a later touch faults in new ones the NIC does not know.
  if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    publish_unmap(a, a + page_up(len));
  }
  return static_cast<int>(syscall(SYS_madvise, addr, len, advice));
}

// shmdt() takes no length: find the end of the mapping that starts at addr in
// /proc/self/maps (raw syscalls, stack buffer; shmdt is rare). Over-invalidating by a
// page range is harmless, missing one is not, so on any parse trouble use 1 GiB.
uintptr_t shm_end(uintptr_t addr) {
  const uintptr_t fallback = addr + (uintptr_t{1} << 30);
  const int fd = static_cast<int>(syscall(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return fallback;
  char buf[4096];
  size_t have = 0;
  uintptr_t result = fallback;
  for (;;) {
    const long n = syscall(SYS_read, fd, buf + have, sizeof(buf) - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    size_t line = 0;
    for (size_t i = 0; i < have; ++i) {
      if (buf[i] != '\n') continue;
      uintptr_t lo = 0, hi = 0;
      size_t j = line;
      for (; j < i && buf[j] != '-'; ++j) lo = lo * 16 + static_cast<uintptr_t>(buf[j] <= '9' ? buf[j] - '0' : buf[j] - 'a' + 10);
      for (++j; j < i && buf[j] != ' '; ++j) hi = hi * 16 + static_cast<uintptr_t>(buf[j] <= '9' ? buf[j] - '0' : buf[j] - 'a' + 10);
      if (lo == addr) { result = hi; goto done; }
      line = i + 1;
    }
    memmove(buf, buf + line, have - line);
    have -= line;
    if (have == sizeof(buf)) break;
  }
done:
  syscall(SYS_close, fd);
  return result;
}

int hook_shmdt(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  publish_unmap(a, shm_end(a));
  return static_cast<int>(syscall(SYS_shmdt, addr));
}

void** g_curbrk = nullptr;  // glibc's exported __curbrk, kept in sync as __brk does

// Covers sbrk() and malloc's heap trim: glibc's __sbrk calls __brk directly.
int hook_brk(void* addr) {
  const auto cur = static_cast<uintptr_t>(syscall(SYS_brk, 0));
  const auto want = reinterpret_cast<uintptr_t>(addr);
  if (want < cur) publish_unmap(want, cur);
  const long now = syscall(SYS_brk, addr);
  *g_curbrk = reinterpret_cast<void*>(now);
  if (static_cast<uintptr_t>(now) < want) {
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

struct Patch {
  const char* name;
  void* hook;
  uint8_t* target = nullptr;
  uint8_t code[kPatchLen] = {};  // the word at target once patched
};

Patch g_patches[] = {
    {"mmap", reinterpret_cast<void*>(&hook_mmap)},
    {"munmap", reinterpret_cast<void*>(&hook_munmap)},
    {"mremap", reinterpret_cast<void*>(&hook_mremap)},
    {"madvise", reinterpret_cast<void*>(&hook_madvise)},
    {"shmdt", reinterpret_cast<void*>(&hook_shmdt)},
    {"brk", reinterpret_cast<void*>(&hook_brk)},
};

std::mutex g_mu;
bool g_done = false;
std::string g_error;

bool looks_patched(const uint8_t* p) {
  return p[0] == 0xE9 || p[0] == 0xEB || (p[0] == 0xFF && p[1] == 0x25) ||
         (p[0] == 0x49 && p[1] == 0xBB) || (p[0] == 0x48 && p[1] == 0xB8);
}

std::string write_code(uint8_t* target, const uint8_t* code) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(target) & ~(page_size() - 1);
  void* page = reinterpret_cast<void*>(first);  // an aligned word never crosses a page
  if (mprotect(page, page_size(), PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    return std::string("mprotect(libc text, RWX) failed: ") + strerror(errno);
  }
  uint64_t word;
  memcpy(&word, code, sizeof word);
  __atomic_store_n(reinterpret_cast<uint64_t*>(target), word, __ATOMIC_SEQ_CST);
  __builtin___clear_cache(reinterpret_cast<char*>(target), reinterpret_cast<char*>(target + kPatchLen));
  if (mprotect(page, page_size(), PROT_READ | PROT_EXEC) != 0) {
    return std::string("mprotect(libc text, RX) failed: ") + strerror(errno);
  }
  return {};
}

// One page within +-2 GiB of `near` (a rel32 jump from libc reaches it), or nullptr.
// The kernel ignores a hint it cannot honour, so each candidate is checked.
uint8_t* page_near(uintptr_t near) {
  const uintptr_t step = uintptr_t{1} << 20;
  const uintptr_t reach = (uintptr_t{1} << 31) - 2 * step;
  for (uintptr_t d = step; d < reach; d += step) {
    for (const bool below : {true, false}) {
      if (below && near < d + step) continue;
      const uintptr_t hint = ((below ? near - d : near + d)) & ~(page_size() - 1);
      void* p = mmap(reinterpret_cast<void*>(hint), page_size(), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED) continue;
      if (p == reinterpret_cast<void*>(hint)) return static_cast<uint8_t*>(p);
      munmap(p, page_size());
    }
  }
  return nullptr;
}

bool reaches(const uint8_t* from_next, const uint8_t* to) {
  const auto diff = reinterpret_cast<intptr_t>(to) - reinterpret_cast<intptr_t>(from_next);
  return diff >= INT32_MIN && diff <= INT32_MAX;
}

std::string install_locked() {
#if !defined(__x86_64__) || !defined(__GLIBC__)
  return "libc patching is implemented for x86_64 glibc only (use invalidation=ucm)";
#else
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (libc == nullptr) return "libc.so.6 not found";
  g_curbrk = static_cast<void**>(dlsym(libc, "__curbrk"));
  if (g_curbrk == nullptr) return "glibc does not export __curbrk";
  // Resolve and check everything before changing anything.
  for (Patch& p : g_patches) {
    void* fn = dlsym(libc, p.name);
    Dl_info info;
    ElfW(Sym)* sym = nullptr;
    if (fn == nullptr || dladdr1(fn, &info, reinterpret_cast<void**>(&sym), RTLD_DL_SYMENT) == 0 ||
        sym == nullptr) {
      return std::string("cannot resolve libc ") + p.name;
    }
    if (sym->st_size < kPatchLen) return std::string("libc ") + p.name + " is too short to patch";
    p.target = static_cast<uint8_t*>(fn);
    if (reinterpret_cast<uintptr_t>(p.target) % kPatchLen != 0) {
      return std::string("libc ") + p.name + " is not 8-byte aligned (no atomic patch)";
    }
    if (looks_patched(p.target)) {
      return std::string("libc ") + p.name + " is already patched by someone else (libucm?)";
    }
  }
  uint8_t* stubs = page_near(reinterpret_cast<uintptr_t>(g_patches[0].target));
  if (stubs == nullptr) return "no free page within 2 GiB of libc for the jump stubs";
  static_assert(std::size(g_patches) * kStubLen <= 4096);
  for (size_t i = 0; i < std::size(g_patches); ++i) {
    Patch& p = g_patches[i];
    uint8_t* stub = stubs + i * kStubLen;
    if (!reaches(p.target + kRelJumpLen, stub)) {
      munmap(stubs, page_size());
      return std::string("libc ") + p.name + " is out of a 32-bit jump's reach of the stubs";
    }
    const auto dest = reinterpret_cast<uint64_t>(p.hook);
    stub[0] = 0x49;  // movabs $hook, %r11
    stub[1] = 0xBB;
    memcpy(stub + 2, &dest, sizeof dest);
    stub[10] = 0x41;  // jmp *%r11
    stub[11] = 0xFF;
    stub[12] = 0xE3;
    const auto rel = static_cast<int32_t>(reinterpret_cast<intptr_t>(stub) -
                                          reinterpret_cast<intptr_t>(p.target + kRelJumpLen));
    memcpy(p.code, p.target, kPatchLen);  // bytes 5..7 stay the original code
    p.code[0] = 0xE9;
    memcpy(p.code + 1, &rel, sizeof rel);
  }
  if (mprotect(stubs, page_size(), PROT_READ | PROT_EXEC) != 0) {
    munmap(stubs, page_size());
    return std::string("mprotect(jump stubs, RX) failed: ") + strerror(errno);
  }
  for (Patch& p : g_patches) {
    std::string err = write_code(p.target, p.code);
    if (!err.empty()) return err;
  }
  return {};
#endif
}

}  // namespace

std::string install_libc_patches() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_done) {
    g_error = install_locked();
    g_done = true;
  }
  return g_error;
}

bool libc_patches_intact() noexcept {
  for (const Patch& p : g_patches) {
    if (p.target != nullptr && memcmp(p.target, p.code, kPatchLen) != 0) return false;
  }
  return true;
}

}  // namespace mlxa2a::rcache::detail
