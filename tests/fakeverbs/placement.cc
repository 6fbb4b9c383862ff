#include "placement.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <limits.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "common.h"
#include "hca.h"
#include "rendezvous.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace fakeverbs {
namespace {

constexpr uint64_t kLine = 64;
constexpr uint64_t kPresent = 1ull << 63;
constexpr uint64_t kSwapped = 1ull << 62;
constexpr uint64_t kPfnMask = (1ull << 55) - 1;

uint64_t page_size() {
  static const uint64_t p = uint64_t(sysconf(_SC_PAGESIZE));
  return p;
}

std::string pin_name(pid_t pid, uint32_t key) {
  return std::to_string(pid) + ".pin." + std::to_string(key);
}

// Reads `n` 8-byte entries at entry index `first` of a file; false on error.
bool read_entries(const std::string& path, uint64_t first, size_t n, uint64_t* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t want = n * 8;
  ssize_t got = pread(fd, out, want, off_t(first * 8));
  close(fd);
  return got == ssize_t(want);
}

// True if the page recorded as `then` is not the page mapped `now`.
bool moved(uint64_t then, uint64_t now) {
  if (!(now & kPresent)) return !(now & kSwapped);  // gone: unmapped or discarded
  return (then & kPfnMask) != 0 && (then & kPfnMask) != (now & kPfnMask);
}

// Per page of [addr, addr+len): stale?  Empty if none is (the usual case).
std::vector<bool> stale_pages(const PinnedRange& r, uint64_t addr, uint64_t len) {
  if (r.key == 0 || len == 0) return {};
  const uint64_t ps = page_size();
  const uint64_t first = addr / ps, last = (addr + len - 1) / ps, n = last - first + 1;
  std::vector<uint64_t> then(n), now(n);
  if (!read_entries(rendezvous_path(pin_name(r.pid, r.key)), first - r.mr_addr / ps, n,
                    then.data()) ||
      !read_entries("/proc/" + std::to_string(r.pid) + "/pagemap", first, n, now.data()))
    return {};  // cannot tell (owner gone, file missing): nothing claimed
  std::vector<bool> out;
  for (uint64_t i = 0; i < n; ++i) {
    if (moved(then[i], now[i])) {
      if (out.empty()) out.assign(n, false);
      out[i] = true;
    }
  }
  return out;
}

struct Piece {
  char* src;
  char* dst;
  uint64_t len;
  bool drop;    // destination page stale: the bytes go to the pinned old page
  bool poison;  // source page stale: the HCA reads the old page
};

// Cuts the transfer at 64-byte boundaries of the remote address space and at
// iovec boundaries of both sides.
std::vector<Piece> cut(const Side& src, const Side& dst, bool write) {
  std::vector<Piece> out;
  size_t si = 0, di = 0;
  uint64_t so = 0, doff = 0;
  while (si < src.iov.size() && di < dst.iov.size()) {
    const iovec& s = src.iov[si];
    const iovec& d = dst.iov[di];
    if (so == s.iov_len) { ++si; so = 0; continue; }
    if (doff == d.iov_len) { ++di; doff = 0; continue; }
    char* sp = static_cast<char*>(s.iov_base) + so;
    char* dp = static_cast<char*>(d.iov_base) + doff;
    const uint64_t remote = uintptr_t(write ? dp : sp);
    uint64_t n = std::min<uint64_t>(s.iov_len - so, d.iov_len - doff);
    n = std::min(n, kLine - remote % kLine);
    out.push_back({sp, dp, n, false, false});
    so += n;
    doff += n;
  }
  return out;
}

// Marks pieces whose pages moved since registration; returns bytes marked.
uint64_t mark(const Side& side, std::vector<Piece>& pieces, bool is_dst) {
  uint64_t marked = 0;
  const uint64_t ps = page_size();
  size_t p = 0;
  for (size_t i = 0; i < side.iov.size() && p < pieces.size(); ++i) {
    const uint64_t base = uintptr_t(side.iov[i].iov_base), len = side.iov[i].iov_len;
    const std::vector<bool> stale = side.pins.size() > i ? stale_pages(side.pins[i], base, len)
                                                          : std::vector<bool>{};
    // Pieces of this iovec are the next ones whose address lies inside it.
    for (; p < pieces.size(); ++p) {
      const uint64_t a = uintptr_t(is_dst ? pieces[p].dst : pieces[p].src);
      if (a < base || a >= base + len) break;
      if (!stale.empty() && stale[a / ps - base / ps]) {
        (is_dst ? pieces[p].drop : pieces[p].poison) = true;
        marked += pieces[p].len;
      }
    }
  }
  return marked;
}

bool move(pid_t peer, std::vector<Piece>& pieces, bool write) {
  static const std::vector<uint8_t> poison(kLine, 0xdb);
  std::vector<iovec> l, r;
  auto flush = [&]() {
    if (l.empty()) return true;
    size_t want = 0;
    for (const iovec& v : l) want += v.iov_len;
    ssize_t n = write ? process_vm_writev(peer, l.data(), l.size(), r.data(), r.size(), 0)
                      : process_vm_readv(peer, l.data(), l.size(), r.data(), r.size(), 0);
    l.clear();
    r.clear();
    if (n != ssize_t(want)) {
      log_error("process_vm_%s with pid %d moved %zd of %zu bytes: %s%s",
                write ? "writev" : "readv", int(peer), n, want,
                n < 0 ? strerror(errno) : "short",
                n < 0 && errno == EPERM ? " (ptrace restricted: see FIDELITY.md)" : "");
      if (n >= 0) errno = EFAULT;
      return false;
    }
    return true;
  };
  for (Piece& pc : pieces) {
    if (pc.drop) continue;
    if (pc.poison) {
      // Reading a stale local page: the HCA would send the old contents.
      if (write) {
        pc.src = const_cast<char*>(reinterpret_cast<const char*>(poison.data()));
      } else {
        continue;  // remote source stale on a READ: leave ours untouched below
      }
    }
    iovec local = write ? iovec{pc.src, pc.len} : iovec{pc.dst, pc.len};
    iovec remote = write ? iovec{pc.dst, pc.len} : iovec{pc.src, pc.len};
    l.push_back(local);
    r.push_back(remote);
    if (l.size() == IOV_MAX && !flush()) return false;
  }
  if (!flush()) return false;
  if (!write) {
    for (Piece& pc : pieces)
      if (pc.poison && !pc.drop) memset(pc.dst, 0xdb, pc.len);
  }
  return true;
}

// Real pinning: the pages of a registration must not be freed (and their
// frames handed to the next mmap) while it exists, or a remap could get the
// same frames back and look unchanged.  vmsplice() of the range into a pipe
// takes a reference on every page (like get_user_pages); the read end is
// kept until ibv_dereg_mr.  Bounded by kMaxPipes descriptors per process;
// beyond that a registration is only recorded (frame reuse then goes unseen).
constexpr int kMaxPipes = 256;
std::mutex g_pipes_mu;
std::map<uint32_t, std::vector<int>> g_pipes;  // MR key -> pipe read ends
int g_pipe_count = 0;

void hold_pages(uint32_t key, uintptr_t first, uintptr_t end) {
  std::lock_guard<std::mutex> g(g_pipes_mu);
  std::vector<int>& fds = g_pipes[key];
  uintptr_t at = first;
  while (at < end && g_pipe_count < kMaxPipes) {
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) break;
    // As large as allowed (root may pass pipe-max-size).
    for (int sz = 64 << 20; sz >= 4096 && fcntl(p[1], F_SETPIPE_SZ, sz) < 0; sz /= 4) {
    }
    ++g_pipe_count;
    bool progressed = false;
    while (at < end) {
      iovec v{reinterpret_cast<void*>(at), end - at};
      ssize_t n = vmsplice(p[1], &v, 1, SPLICE_F_NONBLOCK);
      if (n <= 0) break;  // pipe full (EAGAIN): next pipe
      at += uintptr_t(n);
      progressed = true;
    }
    close(p[1]);
    fds.push_back(p[0]);
    if (!progressed) break;
  }
  static bool told = false;
  if (at < end && !told) {
    told = true;
    log_error("page pinning budget (%d pipes) exhausted: frames of further registrations "
              "may be reused after a remap without being seen as stale", kMaxPipes);
  }
}

}  // namespace

bool stale_aborts() {
  static const bool abort_mode = [] {
    const char* v = getenv("FAKEVERBS_STALE");
    if (!v || !*v || !strcmp(v, "count")) return false;
    if (!strcmp(v, "abort")) return true;
    log_error("FAKEVERBS_STALE=%s unknown (count|abort), using count", v);
    return false;
  }();
  return abort_mode;
}

bool place(pid_t peer, const Side& src, const Side& dst, bool write, uint64_t* rng,
           PlaceStats* stats) {
  std::vector<Piece> pieces = cut(src, dst, write);
  stats->stale_src_bytes = mark(src, pieces, false);
  stats->stale_dst_bytes = mark(dst, pieces, true);
  if (rng) {
    // Fisher-Yates with the QP's stream: replayable from the seed.
    for (size_t i = pieces.size(); i > 1; --i)
      std::swap(pieces[i - 1], pieces[next_random(*rng) % i]);
  }
  return move(peer, pieces, write);
}

bool pin_pages(uint32_t key, void* addr, size_t len, bool writable) {
  const uint64_t ps = page_size();
  const uintptr_t first = uintptr_t(addr) & ~(ps - 1);
  const uintptr_t end = (uintptr_t(addr) + len + ps - 1) & ~(ps - 1);
  // get_user_pages: fault every page in, for writing if the MR is writable
  // (a private page then has its own frame, not the shared zero page).
  void* a = reinterpret_cast<void*>(first);
  if (madvise(a, end - first, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) != 0) {
    if (errno != EINVAL) return false;  // EFAULT/ENOMEM: cannot be pinned
    // Kernel without MADV_POPULATE_*: touch each page (an atomic or of 0
    // writes without changing a byte a concurrent thread may write).
    for (uintptr_t p = first; p < end; p += ps) {
      auto* b = reinterpret_cast<unsigned char*>(p);
      if (writable) __atomic_fetch_or(b, 0, __ATOMIC_RELAXED);
      else (void)*static_cast<volatile unsigned char*>(b);
    }
  }
  const size_t n = (end - first) / ps;
  std::vector<uint64_t> entries(n);
  if (!read_entries("/proc/self/pagemap", first / ps, n, entries.data())) {
    static bool told = false;
    if (!told) log_error("cannot read /proc/self/pagemap: stale registrations go undetected");
    told = true;
    return true;
  }
  hold_pages(key, first, end);
  const std::string name = pin_name(getpid(), key);
  int fd = open_new_entry(name, O_WRONLY | O_TRUNC);
  if (fd < 0) return true;  // detection off for this MR, registration still valid
  ssize_t w = write(fd, entries.data(), n * 8);
  close(fd);
  if (w != ssize_t(n * 8)) unlink(rendezvous_path(name).c_str());
  return true;
}

void unpin_pages(uint32_t key) {
  unlink(rendezvous_path(pin_name(getpid(), key)).c_str());
  std::lock_guard<std::mutex> g(g_pipes_mu);
  auto it = g_pipes.find(key);
  if (it == g_pipes.end()) return;
  for (int fd : it->second) close(fd);
  g_pipe_count -= int(it->second.size());
  g_pipes.erase(it);
}

}  // namespace fakeverbs
