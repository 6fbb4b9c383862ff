#include "hca.h"

#include <fcntl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "objects.h"

namespace fakeverbs::hca {
namespace {

// How soon to look again at work that waits for a peer (not ready, RNR):
// long enough not to steal a busy-polling application's core, short enough
// that retries stay far below any transport timeout.
constexpr uint64_t kRetryNs = 50'000;

// Leaked on purpose: the thread may still run while static destructors do.
// A forked child gets a fresh Engine (the parent's mutexes may be held by the
// parent's thread, which does not exist in the child).
struct Engine {
  pid_t pid = 0;
  std::mutex mu;  // guards contexts; held while the thread progresses them
  std::vector<Context*> contexts;
  std::mutex wake_mu;
  std::condition_variable wake;
  uint64_t kicks = 0;  // guarded by wake_mu
  bool stop = false;   // guarded by wake_mu
  std::thread thread;
  std::atomic<uint64_t> cpu_ns{0};  // the thread's own CPU time, set when it ends
};

std::mutex g_engine_mu;
Engine* g_engine = nullptr;

// CPU of the application's threads inside ibv_post_send (PostCpu), per process.
std::atomic<uint64_t> g_post_cpu_ns{0};

// Everything this thread does is what an HCA would do (DMA, placement,
// completions, retries): its CPU time is what benchmarks subtract to get the
// application's own (FAKEVERBS_CPU_FILE, FIDELITY.md).
struct RecordCpu {
  Engine* e;
  ~RecordCpu() { e->cpu_ns.store(thread_cpu_ns(), std::memory_order_release); }
};

void run(Engine* e) {
  RecordCpu record{e};
  uint64_t seen = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> w(e->wake_mu);
      if (e->stop) return;
      seen = e->kicks;
    }
    uint64_t next = UINT64_MAX;
    {
      std::lock_guard<std::mutex> g(e->mu);
      for (Context* ctx : e->contexts) {
        std::lock_guard<std::mutex> c(ctx->mu);
        for (auto& [qpn, qp] : ctx->qps) {
          std::lock_guard<std::mutex> q(qp->mu);
          if (!qp->busy()) continue;
          uint64_t due = progress(*qp);
          next = std::min(next, due);
        }
        if (!ctx->channel_cqs.empty()) next = std::min(next, check_armed(*ctx));
      }
    }
    std::unique_lock<std::mutex> w(e->wake_mu);
    if (e->stop) return;
    if (e->kicks != seen) continue;  // work posted meanwhile
    if (next == UINT64_MAX) {
      e->wake.wait(w, [&] { return e->stop || e->kicks != seen; });
    } else {
      const uint64_t now = now_ns();
      const uint64_t wait = next == kBlocked ? kRetryNs : next > now ? next - now : 0;
      e->wake.wait_for(w, std::chrono::nanoseconds(wait),
                       [&] { return e->stop || e->kicks != seen; });
    }
  }
}

// FAKEVERBS_CPU_FILE=path: append "pid <pid> hca_cpu_ns <ns> post_cpu_ns <ns>" with one
// O_APPEND write (atomic for a line this short), so the ranks of a job can
// share the file.
void report_cpu(uint64_t ns) {
  if (!cpu_file_set()) return;
  const char* path = getenv("FAKEVERBS_CPU_FILE");
  char line[128];
  const int n = snprintf(line, sizeof line, "pid %d hca_cpu_ns %llu post_cpu_ns %llu\n",
                         int(getpid()), (unsigned long long)ns,
                         (unsigned long long)g_post_cpu_ns.load(std::memory_order_relaxed));
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    log_error("FAKEVERBS_CPU_FILE=%s: cannot open it", path);
    return;
  }
  if (n <= 0 || write(fd, line, size_t(n)) != n) log_error("FAKEVERBS_CPU_FILE=%s: write failed", path);
  close(fd);
}

void stop_at_exit() {
  Engine* e;
  {
    std::lock_guard<std::mutex> g(g_engine_mu);
    e = g_engine;
  }
  if (!e || e->pid != getpid() || !e->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> w(e->wake_mu);
    e->stop = true;
  }
  e->wake.notify_all();
  e->thread.join();
  report_cpu(e->cpu_ns.load(std::memory_order_acquire));
}

// Caller holds g_engine_mu.
Engine* engine_locked() {
  if (!g_engine || g_engine->pid != getpid()) {
    const bool first = g_engine == nullptr;
    g_engine = new Engine;  // a parent's engine is deliberately leaked in a child
    g_engine->pid = getpid();
    if (first) atexit(stop_at_exit);
  }
  return g_engine;
}

Engine* engine() {
  std::lock_guard<std::mutex> g(g_engine_mu);
  Engine* e = engine_locked();
  if (!e->thread.joinable()) e->thread = std::thread(run, e);
  return e;
}

uint64_t env_u64(const char* name, uint64_t def) {
  const char* v = getenv(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  unsigned long long x = strtoull(v, &end, 0);
  if (*end) {
    log_error("%s=%s is not a number, using %llu", name, v, (unsigned long long)def);
    return def;
  }
  return x;
}

}  // namespace

bool cpu_file_set() {
  static const bool set = [] {
    const char* path = getenv("FAKEVERBS_CPU_FILE");
    return path && *path;
  }();
  return set;
}

uint64_t thread_cpu_ns() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

PostCpu::~PostCpu() {
  if (on_) g_post_cpu_ns.fetch_add(thread_cpu_ns() - start_, std::memory_order_relaxed);
}

void register_context(Context* ctx) {
  Engine* e = engine();
  std::lock_guard<std::mutex> g(e->mu);
  e->contexts.push_back(ctx);
}

void unregister_context(Context* ctx) {
  Engine* e = engine();
  std::lock_guard<std::mutex> g(e->mu);
  e->contexts.erase(std::remove(e->contexts.begin(), e->contexts.end(), ctx), e->contexts.end());
}

void kick() {
  Engine* e = engine();
  {
    std::lock_guard<std::mutex> w(e->wake_mu);
    e->kicks++;
  }
  e->wake.notify_one();
}

uint64_t seed() {
  // Read once per process image; a forked child keeps its parent's seed
  // (its QPs are new, with new creation indices).
  static const uint64_t s = [] {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r) r = now_ns() ^ uint64_t(getpid());
    return env_u64("FAKEVERBS_SEED", r);
  }();
  return s;
}

uint64_t jitter_ns() {
  static const uint64_t j = env_u64("FAKEVERBS_JITTER_US", 20) * 1000;
  return j;
}

uint64_t stream_seed(uint64_t index) {
  uint64_t s = seed() ^ (index * 0xd1b54a32d192ed03ull);
  return next_random(s);
}

}  // namespace fakeverbs::hca
