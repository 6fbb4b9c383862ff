#include "core/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace mlxa2a::shm {

namespace {

// Closes the descriptor on every path; the mapping outlives it (mmap(2)).
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// 64 bits an attacker cannot guess (getrandom(2)); if the call is
// unavailable, the clock and an address still vary from run to run.
unsigned long long random_part() noexcept {
  unsigned long long r = 0;
  for (;;) {
    if (::getrandom(&r, sizeof r, 0) == static_cast<ssize_t>(sizeof r)) return r;
    if (errno != EINTR) break;
  }
  static int anchor;
  return static_cast<unsigned long long>(
             std::chrono::steady_clock::now().time_since_epoch().count()) ^
         reinterpret_cast<std::uintptr_t>(&anchor);
}

// A leftover of ours: a regular file (a symlink is not followed, a FIFO does
// not block the open) owned by our effective uid, the owner of what we create.
// Another user's file of a matching name is theirs to judge, whatever the pid.
bool owned_regular_file(const char* path) noexcept {
  Fd f{::open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  struct stat st {};
  return f.fd >= 0 && ::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
}

// MADV_POPULATE_WRITE (Linux 5.14) where the headers predate it.
#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;
#endif

void* map(int fd, std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

Segment::~Segment() { reset(); }

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    name_ = std::move(other.name_);
    owns_name_ = std::exchange(other.owns_name_, false);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    fd_ = std::exchange(other.fd_, -1);
    pages_ = std::exchange(other.pages_, Pages::normal);
  }
  return *this;
}

void Segment::reset() noexcept {
  unlink();
  if (base_ != nullptr) ::munmap(base_, map_bytes_);
  base_ = nullptr;
  size_ = map_bytes_ = 0;
  name_.clear();
  pages_ = Pages::normal;
}

void Segment::unlink() noexcept {
  if (fd_ >= 0) {  // a memfd: peers attach through our descriptor until now
    ::close(fd_);
    fd_ = -1;
  }
  if (owns_name_) {
    char path[320];  // no allocation: this runs in destructors
    std::snprintf(path, sizeof path, "/%s", name_.c_str());
    ::shm_unlink(path);
    owns_name_ = false;
  }
}

Status Segment::create_memfd(const std::string& name, std::size_t bytes, unsigned flags,
                             std::size_t page, Segment& out) {
  if (name.empty() || bytes == 0 || page == 0) return Status::invalid_argument;
  const int fd = ::memfd_create(name.c_str(), flags | MFD_CLOEXEC);
  if (fd < 0) return Status::create_failed;
  Segment seg;
  seg.fd_ = fd;  // closed by the destructor on failure
  seg.map_bytes_ = (bytes + page - 1) / page * page;
  // Huge pages are reserved at mmap: a shortage fails here, not as SIGBUS.
  if (::ftruncate(fd, static_cast<off_t>(seg.map_bytes_)) != 0) return Status::create_failed;
  seg.base_ = map(fd, seg.map_bytes_);
  if (seg.base_ == nullptr) return Status::create_failed;
  seg.size_ = bytes;
  seg.name_ = "memfd:" + std::to_string(::getpid()) + ":" + std::to_string(fd);
  seg.pages_ = (flags & MFD_HUGETLB) != 0 ? Pages::hugetlb : Pages::normal;
  out = std::move(seg);
  return Status::ok;
}

Status Segment::create(const std::string& name, std::size_t bytes, Segment& out, Pages pages) {
  if (name.empty() || name.find('/') != std::string::npos || bytes == 0)
    return Status::invalid_argument;
  const PageFacts facts = pages != Pages::normal ? read_page_facts() : PageFacts{};
  if (pages == Pages::hugetlb && facts.hugepage_bytes != 0 &&
      create_memfd(name, bytes, MFD_HUGETLB, facts.hugepage_bytes, out) == Status::ok) {
    return Status::ok;
  }
  // No huge pages to be had now: the next best. Advice only where the
  // kernel's shmem THP setting may follow it (else it is 4 KiB, and said so).
  if (!facts.shmem_thp) pages = Pages::normal;
  const std::string path = "/" + name;
  Fd f{::shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600)};
  if (f.fd < 0) return Status::create_failed;
  Segment seg;
  seg.name_ = name;
  seg.owns_name_ = true;  // from here on the destructor unlinks on failure
  if (pages == Pages::thp) {
    // Advice before the pages exist (the kernel picks their size at the
    // fault), then faulted in now, so that a full /dev/shm still fails here.
    if (::ftruncate(f.fd, static_cast<off_t>(bytes)) != 0) return Status::create_failed;
    seg.base_ = map(f.fd, bytes);
    if (seg.base_ == nullptr) return Status::create_failed;
    seg.size_ = seg.map_bytes_ = bytes;
    if (::madvise(seg.base_, bytes, MADV_HUGEPAGE) == 0 &&
        ::madvise(seg.base_, bytes, kPopulateWrite) == 0) {
      seg.pages_ = Pages::thp;
      out = std::move(seg);
      return Status::ok;
    }
    // An older kernel without MADV_POPULATE_WRITE (or no THP at all): the
    // pages are reserved the usual way below, at their usual size.
  }
  // posix_fallocate, unlike ftruncate, really reserves tmpfs pages.
  if (::posix_fallocate(f.fd, 0, static_cast<off_t>(bytes)) != 0) return Status::create_failed;
  if (seg.base_ == nullptr) seg.base_ = map(f.fd, bytes);
  if (seg.base_ == nullptr) return Status::create_failed;
  seg.size_ = seg.map_bytes_ = bytes;
  out = std::move(seg);
  return Status::ok;
}

Status Segment::attach(const std::string& name, std::size_t bytes, Segment& out, bool thp) {
  if (name.empty() || name.find('/') != std::string::npos || bytes == 0)
    return Status::invalid_argument;
  int pid = 0, fd = -1;
  const bool memfd = std::sscanf(name.c_str(), "memfd:%d:%d", &pid, &fd) == 2;
  Fd f{memfd ? ::open(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd)).c_str(),
                      O_RDWR | O_CLOEXEC)
             : ::shm_open(("/" + name).c_str(), O_RDWR, 0)};
  if (f.fd < 0) return Status::create_failed;
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || (memfd ? static_cast<std::size_t>(st.st_size) < bytes
                                        : static_cast<std::size_t>(st.st_size) != bytes))
    return Status::create_failed;
  Segment seg;
  seg.map_bytes_ = static_cast<std::size_t>(st.st_size);
  seg.base_ = map(f.fd, seg.map_bytes_);
  if (seg.base_ == nullptr) return Status::create_failed;
  if (thp) (void)::madvise(seg.base_, seg.map_bytes_, MADV_HUGEPAGE);  // our mapping too
  seg.size_ = bytes;
  seg.name_ = name;
  out = std::move(seg);
  return Status::ok;
}

std::string make_segment_name(const std::string& prefix, const std::string& tag) {
  static std::atomic<unsigned long> counter{0};
  char buf[96];
  std::snprintf(buf, sizeof buf, "-%u-%d-%lu-%016llx", static_cast<unsigned>(::getuid()),
                static_cast<int>(::getpid()), counter.fetch_add(1, std::memory_order_relaxed),
                random_part());
  std::string name = prefix + buf;
  if (!tag.empty()) name += "-" + tag;
  return name;
}

bool process_alive(int pid) noexcept {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == EPERM;  // EPERM: exists, not ours
  // kill() succeeds on a zombie; an unreaped dead peer must count as dead.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return true;  // no procfs: trust kill()
  char line[512];
  const bool got = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  if (!got) return true;
  // Format "pid (comm) S ...": comm may contain spaces and ')', so take the last ')'.
  const char* close = std::strrchr(line, ')');
  if (close == nullptr || close[1] == '\0' || close[2] == '\0') return true;
  return close[2] != 'Z' && close[2] != 'X';
}

int remove_stale_segments(const std::string& prefix) noexcept try {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/dev/shm"), ::closedir);
  if (!dir) return 0;
  char mine[64];
  std::snprintf(mine, sizeof mine, "-%u-", static_cast<unsigned>(::getuid()));
  const std::string head = prefix + mine;
  int removed = 0;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string n = e->d_name;
    if (n.compare(0, head.size(), head) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(n.c_str() + head.size(), &end, 10);
    if (end == n.c_str() + head.size() || *end != '-' || pid <= 0) continue;
    if (process_alive(static_cast<int>(pid))) continue;
    // Judged, then unlinked by name: /dev/shm is sticky (1777), so only the
    // file's owner (or root) can put another file under that name meanwhile.
    if (!owned_regular_file(("/dev/shm/" + n).c_str())) continue;
    if (::shm_unlink(("/" + n).c_str()) == 0) ++removed;
  }
  return removed;
} catch (...) {  // bad_alloc from the name strings: report nothing removed
  return 0;
}

}  // namespace mlxa2a::shm
