#include "core/mlx5/fork_watch.h"

#include <pthread.h>

#include <mutex>

#include "core/log.h"

namespace mlxa2a::mlx5 {

namespace detail {
std::atomic<std::uint64_t> g_forks{0};
}

namespace {

void parent_after_fork() { detail::g_forks.fetch_add(1, std::memory_order_relaxed); }

const char* status_name(int s) {
  switch (s) {
    case IBV_FORK_DISABLED: return "disabled";
    case IBV_FORK_ENABLED: return "enabled";
    case IBV_FORK_UNNEEDED: return "unneeded";
    default: return "unknown";
  }
}

}  // namespace

bool watch_forks(const Verbs& v) noexcept {
  static std::once_flag once;
  static bool flush = true;
  std::call_once(once, [&v] {
    const int s = v.is_fork_initialized ? static_cast<int>(v.is_fork_initialized()) : -1;
    flush = s != IBV_FORK_UNNEEDED && s != IBV_FORK_ENABLED;
    if (flush && pthread_atfork(nullptr, parent_after_fork, nullptr) != 0) {
      MLXA2A_LOG(Warn, "zero-copy: pthread_atfork failed; a fork() may leave stale registrations");
    }
    MLXA2A_LOG(Info, "zero-copy: verbs fork support %s: %s", status_name(s),
               flush ? "registrations are flushed after each fork()" : "nothing to do at fork()");
  });
  return flush;
}

}  // namespace mlxa2a::mlx5
