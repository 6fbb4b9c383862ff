// fakeverbs: the per-process "HCA" -- a progress thread that executes posted
// work requests, so that ibv_post_send returns before any byte moves and
// completions appear later, as on a ConnectX.
//
// Contract:
//  * kick() after queuing work; the thread wakes, executes every QP's due work
//    requests in posting order (progress(), post.cc), fires armed completion
//    channels (channel.cc) and sleeps again.  It is started when a process
//    first opens a device (again in a forked child) and stopped and joined
//    at exit, before the rendezvous files are removed.
//  * Contexts are registered by ibv_open_device and unregistered by
//    ibv_close_device; the thread touches only registered contexts.
//  * Lock order: the engine's mutex -> Context::mu -> Qp::mu -> shared file
//    mutexes.  kick() takes only the wake mutex, so it may be called with
//    any of them held.
//  * Randomness: one seed per process (FAKEVERBS_SEED, else random), printed
//    with the first diagnostic so a failing run can be replayed.  Each QP
//    draws its jitter and placement order from its own generator seeded by
//    (seed, creation index), so QPs are independent and replayable.
//
// Thread safety: every function is thread-safe.
#pragma once

#include <cstdint>

namespace fakeverbs {

struct Context;

namespace hca {

void register_context(Context* ctx);
void unregister_context(Context* ctx);  // blocks while the thread works on it
void kick();

uint64_t seed();            // this process's seed
uint64_t jitter_ns();       // FAKEVERBS_JITTER_US (default 20) in ns
// A deterministic stream for one QP (or MR key generator) from the seed.
uint64_t stream_seed(uint64_t index);

// FAKEVERBS_CPU_FILE (FIDELITY.md, "Measuring CPU on the fake"): whether it is
// set, and the calling thread's CPU clock. PostCpu adds the CPU an
// application thread spends in ibv_post_send to the reported post_cpu_ns.
bool cpu_file_set();
uint64_t thread_cpu_ns();
class PostCpu {
 public:
  PostCpu() : on_(cpu_file_set()), start_(on_ ? thread_cpu_ns() : 0) {}
  ~PostCpu();
  PostCpu(const PostCpu&) = delete;
  PostCpu& operator=(const PostCpu&) = delete;

 private:
  bool on_;
  uint64_t start_;
};

}  // namespace hca

// splitmix64: small, fast, and good enough to shuffle and jitter.
inline uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace fakeverbs
