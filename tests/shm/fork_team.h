// Test harness: runs a function in n forked processes that form one "node",
// with a Bootstrap over shared anonymous memory created before the fork.
//
// The children report through their exit code (0 = pass) and stderr; gtest
// assertions do not cross fork(), so child code uses the FT_CHECK macros.
#pragma once

#include <cstdio>
#include <functional>
#include <vector>

#include "core/shm/bootstrap.h"

namespace mlxa2a::shm::test {

struct Rendezvous;

class ForkBootstrap final : public Bootstrap {
 public:
  ForkBootstrap(Rendezvous* rv, int rank, int size) : rv_(rv), rank_(rank), size_(size) {}
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  bool broadcast(void* buf, std::size_t len, int root) override;
  bool barrier() override;
  bool fail_broadcast = false;  // fault injection: this rank's broadcast fails

 private:
  Rendezvous* rv_;
  int rank_;
  int size_;
};

struct ForkResult {
  std::vector<int> exit_codes;  // per rank; 128 + signal if killed
  bool hung = false;            // the deadline passed and survivors were killed
  double seconds = 0;
};

// Forks n ranks running fn(boot); waits at most deadline_s for all of them.
ForkResult run_forked(int n, const std::function<int(ForkBootstrap&)>& fn, double deadline_s = 30);

// Forks node_of.size() ranks forming several "nodes": rank r runs fn(boot, r),
// where boot spans the ranks q with node_of[q] == node_of[r] (local ranks in
// rank order). Node numbers are 0, 1, ...
ForkResult run_forked_nodes(const std::vector<int>& node_of,
                            const std::function<int(ForkBootstrap&, int)>& fn,
                            double deadline_s = 30);

}  // namespace mlxa2a::shm::test

#define FT_CHECK(cond)                                                            \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

#define FT_CHECK_STATUS(expr, want)                                                   \
  do {                                                                                \
    const ::mlxa2a::shm::Status ft_st_ = (expr);                                      \
    if (ft_st_ != (want)) {                                                           \
      std::fprintf(stderr, "%s:%d: %s returned '%s', want '%s'\n", __FILE__, __LINE__, \
                   #expr, ::mlxa2a::shm::to_string(ft_st_), ::mlxa2a::shm::to_string(want)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)
