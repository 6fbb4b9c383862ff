#include "rendezvous.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common.h"
#include "sweep.h"

namespace fakeverbs {
namespace {

void ensure_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    log_error("cannot create rendezvous directory %s: %s", dir.c_str(), strerror(errno));
}

std::string dir_name() {
  std::string dir;
  if (const char* v = getenv("FAKEVERBS_DIR"); v && *v) {
    dir = v;
  } else {
    const char* job = getenv("FAKEVERBS_JOB");
    if (!job || !*job) job = getenv("PMIX_NAMESPACE");
    if (!job || !*job) job = "default";
    std::string j(job);
    for (char& c : j)
      if (c == '/') c = '_';
    dir = "/dev/shm/fakeverbs-" + std::to_string(getuid()) + "-" + j;
  }
  ensure_dir(dir);
  return dir;
}

// Per-process (re-made after fork: a child must not inherit the parent's
// cached state, only the directory name which is the same anyway).
struct DirState {
  pid_t pid = 0;
  std::string dir;
};

// Objects the application never destroyed must not outlive it in the
// directory; rmdir then fails harmlessly while other processes have entries.
void cleanup_at_exit() {
  const std::string& dir = rendezvous_dir();
  sweep_dir(dir, getpid(), nullptr);
  rmdir(dir.c_str());
}

}  // namespace

const std::string& rendezvous_dir() {
  static std::mutex mu;
  static DirState st;
  std::lock_guard<std::mutex> g(mu);
  if (st.pid != getpid()) {
    bool first = st.pid == 0;
    st.dir = dir_name();
    st.pid = getpid();
    // A forked child only tidies the directory it already knows; the
    // start-up sweep (siblings too, logged) is once per program.
    if (first) {
      sweep_at_start(st.dir);
      atexit(cleanup_at_exit);
    } else {
      sweep_dir(st.dir, 0, nullptr);
    }
  }
  return st.dir;
}

std::string rendezvous_path(const std::string& name) {
  return rendezvous_dir() + "/" + name;
}

// A sweeper of another job may remove the directory while it is empty, i.e.
// between our mkdir and our first entry (sweep.h): ENOENT then means "make
// it again", once.
int open_new_entry(const std::string& name, int flags) {
  const std::string path = rendezvous_path(name);
  int fd = ::open(path.c_str(), flags | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {
    ensure_dir(rendezvous_dir());
    fd = ::open(path.c_str(), flags | O_CREAT | O_CLOEXEC, 0600);
  }
  return fd;
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    name_ = std::move(o.name_);
    owner_ = o.owner_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.owner_ = false;
  }
  return *this;
}

void MappedFile::reset() {
  if (data_) munmap(data_, size_);
  if (owner_ && getpid() == owner_pid_of(name_)) unlink(rendezvous_path(name_).c_str());
  data_ = nullptr;
  size_ = 0;
  owner_ = false;
  name_.clear();
}

bool MappedFile::create(const std::string& name, size_t size) {
  reset();
  std::string path = rendezvous_path(name);
  unlink(path.c_str());  // a dead process with our pid (pid reuse) left it
  int fd = open_new_entry(name, O_RDWR | O_EXCL);
  if (fd < 0) return false;
  // ftruncate gives a sparse, zero-filled file: big queues cost nothing
  // until used.
  if (ftruncate(fd, off_t(size)) != 0) {
    int e = errno;
    close(fd);
    unlink(path.c_str());
    errno = e;
    return false;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    unlink(path.c_str());
    errno = e;
    return false;
  }
  data_ = p;
  size_ = size;
  name_ = name;
  owner_ = true;
  return true;
}

bool MappedFile::open(const std::string& name) {
  reset();
  int fd = ::open(rendezvous_path(name).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    close(fd);
    return false;
  }
  void* p = mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return false;
  data_ = p;
  size_ = size_t(st.st_size);
  name_ = name;
  owner_ = false;
  return true;
}

void shared_mutex_init(pthread_mutex_t* m) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
}

SharedLock::SharedLock(pthread_mutex_t* m) : m_(m) {
  int rc = pthread_mutex_lock(m_);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(m_);
}

SharedLock::~SharedLock() { pthread_mutex_unlock(m_); }

bool pid_alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

pid_t owner_pid_of(const std::string& name) {
  if (name.empty() || name[0] < '0' || name[0] > '9') return 0;
  return pid_t(strtol(name.c_str(), nullptr, 10));
}

bool publish_link(const std::string& link, const std::string& target) {
  std::string path = rendezvous_path(link);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (symlink(target.c_str(), path.c_str()) == 0) return true;
    if (errno == ENOENT && attempt == 0) {  // directory swept away: see open_new_entry
      ensure_dir(rendezvous_dir());
      continue;
    }
    if (errno != EEXIST) return false;
    char old[256];
    ssize_t n = readlink(path.c_str(), old, sizeof old - 1);
    if (n > 0) {
      old[n] = 0;
      if (pid_alive(owner_pid_of(old))) {
        errno = EEXIST;
        return false;
      }
    }
    unlink(path.c_str());  // dead owner: take the name over
  }
  errno = EEXIST;
  return false;
}

std::string resolve_link(const std::string& link) {
  char target[256];
  ssize_t n = readlink(rendezvous_path(link).c_str(), target, sizeof target - 1);
  if (n <= 0) return {};
  target[n] = 0;
  if (!pid_alive(owner_pid_of(target))) return {};
  return target;
}

void remove_entry(const std::string& name) { unlink(rendezvous_path(name).c_str()); }

}  // namespace fakeverbs
