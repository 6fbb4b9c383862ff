#include "tests/shm/fork_team.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

namespace mlxa2a::shm::test {

struct Rendezvous {
  std::atomic<std::uint32_t> arrived;
  std::atomic<std::uint32_t> generation;
  std::atomic<std::uint32_t> failed;  // a broadcast failed: everybody fails
  char data[4096];
};

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kBarrierTimeout = std::chrono::seconds(20);
}  // namespace

bool ForkBootstrap::barrier() {
  const std::uint32_t gen = rv_->generation.load(std::memory_order_acquire);
  if (rv_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(size_)) {
    rv_->arrived.store(0, std::memory_order_relaxed);
    rv_->generation.store(gen + 1, std::memory_order_release);
    return true;
  }
  const auto start = Clock::now();
  while (rv_->generation.load(std::memory_order_acquire) == gen) {
    sched_yield();
    if (Clock::now() - start > kBarrierTimeout) return false;
  }
  return true;
}

bool ForkBootstrap::broadcast(void* buf, std::size_t len, int root) {
  if (len > sizeof rv_->data) return false;
  if (fail_broadcast) rv_->failed.store(1, std::memory_order_relaxed);
  if (!barrier()) return false;  // previous users of data are done
  if (rank_ == root) std::memcpy(rv_->data, buf, len);
  if (!barrier()) return false;
  if (rank_ != root) std::memcpy(buf, rv_->data, len);
  if (!barrier()) return false;
  return rv_->failed.load(std::memory_order_relaxed) == 0;
}

ForkResult run_forked(int n, const std::function<int(ForkBootstrap&)>& fn, double deadline_s) {
  return run_forked_nodes(
      std::vector<int>(static_cast<std::size_t>(n), 0),
      [&fn](ForkBootstrap& boot, int) { return fn(boot); }, deadline_s);
}

ForkResult run_forked_nodes(const std::vector<int>& node_of,
                            const std::function<int(ForkBootstrap&, int)>& fn, double deadline_s) {
  const int n = static_cast<int>(node_of.size());
  ForkResult res;
  res.exit_codes.assign(static_cast<std::size_t>(n), -1);
  int nodes = 0;
  for (int v : node_of) nodes = v + 1 > nodes ? v + 1 : nodes;
  const std::size_t bytes = static_cast<std::size_t>(nodes) * sizeof(Rendezvous);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return res;
  auto* rv = static_cast<Rendezvous*>(mem);
  for (int v = 0; v < nodes; ++v) new (rv + v) Rendezvous{};
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  const auto start = Clock::now();
  for (int r = 0; r < n; ++r) {
    const int node = node_of[static_cast<std::size_t>(r)];
    int local_rank = 0, local_size = 0;
    for (int q = 0; q < n; ++q) {
      if (node_of[static_cast<std::size_t>(q)] != node) continue;
      if (q < r) ++local_rank;
      ++local_size;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      ForkBootstrap boot(rv + node, local_rank, local_size);
      int rc = 2;
      try {
        rc = fn(boot, r);
      } catch (...) {
        rc = 3;
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int left = n;
  while (left > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] != pid) continue;
        res.exit_codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
      continue;
    }
    if (std::chrono::duration<double>(Clock::now() - start).count() > deadline_s) {
      res.hung = true;
      for (int r = 0; r < n; ++r)
        if (res.exit_codes[r] == -1) kill(pids[r], SIGKILL);
      deadline_s = 1e9;  // now just reap them
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  munmap(mem, bytes);
  return res;
}

}  // namespace mlxa2a::shm::test
