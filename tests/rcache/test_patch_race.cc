// Installing the libc patches while other threads are inside the patched functions'
// system calls (issue 15: a rank creating its first registration cache while its other
// threads free memory). A thread blocked in madvise/munmap returns to the instruction
// after `syscall`; the patch must leave that address and everything after it alone.
// Before the 5-byte jump (rcache/libc_patch.cc), the 13-byte absolute jump covered it
// and such a thread resumed mid-instruction: most of these children died of SIGSEGV
// or SIGILL.
//
// Its own executable: the patches are installed once per process, so the process
// that forks the children must not have installed them (no other test runs here).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "rcache/libc_patch.h"

namespace mlxa2a::rcache::test {
namespace {

// In a fresh child: two threads call madvise and munmap in tight loops (about
// half of their time is spent inside the system calls) while the main thread
// installs the patches; then everything stops. Exit 0 if nothing crashed.
[[noreturn]] void child() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  auto madviser = [&] {
    void* p = mmap(nullptr, 64 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    started.fetch_add(1);
    while (!stop.load(std::memory_order_relaxed)) madvise(p, 64 * page, MADV_NORMAL);
    munmap(p, 64 * page);
  };
  auto unmapper = [&] {
    started.fetch_add(1);
    while (!stop.load(std::memory_order_relaxed)) {
      void* p = mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) munmap(p, page);
    }
  };
  std::thread a(madviser), b(unmapper);
  while (started.load() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::string err = detail::install_libc_patches();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  stop.store(true);
  a.join();
  b.join();
  _exit(err.empty() && detail::libc_patches_intact() ? 0 : 3);
}

TEST(PatchRace, ThreadsInsideTheSystemCallsSurviveInstallation) {
  constexpr int kChildren = 24;
  int crashed = 0, failed = 0;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) child();
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) ++crashed;
    else if (WEXITSTATUS(status) != 0) ++failed;
  }
  EXPECT_EQ(crashed, 0) << "children killed by a signal while the patches went in";
  EXPECT_EQ(failed, 0) << "children whose installation failed or was not intact";
}

}  // namespace
}  // namespace mlxa2a::rcache::test
