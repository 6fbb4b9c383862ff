#include "rcache/uffd_monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "rcache/unmap_events.h"

namespace mlxa2a::rcache::detail {
namespace {

std::mutex g_mu;
bool g_started = false;
std::string g_error;
int g_fd = -1;

void* monitor(void*) {
  uffd_msg msgs[64];
  for (;;) {
    const ssize_t n = read(g_fd, msgs, sizeof msgs);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return nullptr;  // descriptor gone: nothing more will be reported
    }
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(uffd_msg); ++i) {
      const uffd_msg& m = msgs[i];
      switch (m.event) {
        case UFFD_EVENT_UNMAP:
        case UFFD_EVENT_REMOVE:
          publish_unmap(m.arg.remove.start, m.arg.remove.end);
          break;
        case UFFD_EVENT_REMAP:
          publish_unmap(m.arg.remap.from, m.arg.remap.from + m.arg.remap.len);
          break;
        case UFFD_EVENT_PAGEFAULT: {
          // Not expected (we never write-protect); never leave a thread stuck.
          const uint64_t page = m.arg.pagefault.address & ~uint64_t{4095};
          uffdio_writeprotect wp{{page, 4096}, 0};
          (void)ioctl(g_fd, UFFDIO_WRITEPROTECT, &wp);
          break;
        }
        default:
          break;
      }
    }
  }
}

std::string start_locked() {
  const long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
  if (fd < 0) {
    return std::string("userfaultfd: ") + strerror(errno) +
           " (needs vm.unprivileged_userfaultfd=1 or CAP_SYS_PTRACE)";
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE;
  if (ioctl(static_cast<int>(fd), UFFDIO_API, &api) != 0) {
    close(static_cast<int>(fd));
    return std::string("UFFDIO_API: ") + strerror(errno);
  }
  g_fd = static_cast<int>(fd);
  // The monitor must never take a signal meant for the application.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  const int rc = pthread_create(&t, &attr, monitor, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    close(g_fd);
    g_fd = -1;
    return std::string("cannot start the userfaultfd monitor: ") + strerror(rc);
  }
  return {};
}

}  // namespace

std::string start_uffd_monitor() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_started) {
    g_error = start_locked();
    g_started = true;
  }
  return g_error;
}

bool uffd_watch(uintptr_t start, uintptr_t end) noexcept {
  if (g_fd < 0 || end <= start) return false;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t s = start & ~(page - 1);
  const uintptr_t e = (end + page - 1) & ~(page - 1);
  uffdio_register reg{};
  reg.range.start = s;
  reg.range.len = e - s;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  return ioctl(g_fd, UFFDIO_REGISTER, &reg) == 0;
}

}  // namespace mlxa2a::rcache::detail
