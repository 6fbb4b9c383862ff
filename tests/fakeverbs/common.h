// fakeverbs: internal helpers shared by every translation unit of the fake
// libibverbs.  Nothing here is visible to programs using the fake.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <ctime>

// Exported entry points: the project compiles with -fvisibility=hidden, and a
// hidden symbol cannot be exported by the version script.
#define FV_EXPORT extern "C" __attribute__((visibility("default")))

namespace fakeverbs {

// Pairs a public verbs struct with the C++ object that owns it.  Standard
// layout, so a pointer to `ibv` (what the application holds) converts back to
// the Shell and from there to its owner without offsetof tricks.
template <class Ibv, class Owner>
struct Shell {
  Ibv ibv;
  Owner* owner;
};

template <class Owner, class Ibv>
Owner* owner_of(Ibv* ibv) {
  return ibv ? reinterpret_cast<Shell<Ibv, Owner>*>(ibv)->owner : nullptr;
}

// Diagnostics go to stderr, prefixed, always: the fake exists to make misuse
// loud.  FAKEVERBS_QUIET=1 silences the informational ones (tests that
// provoke errors on purpose).
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

inline uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Sets errno and returns it: verbs returning int report errors as a positive
// errno value (man ibv_modify_qp, ibv_post_send); verbs returning pointers
// return NULL with errno set.
inline int fail(int err) {
  errno = err;
  return err;
}

}  // namespace fakeverbs
