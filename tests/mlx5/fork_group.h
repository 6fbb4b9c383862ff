// GroupBootstrap between forked processes over pipes (tests only).
//
// The parent creates a ForkGroupWiring for n members before forking; each
// child then makes a ForkGroup for its member number. allgather() writes
// this member's bytes (alltoall(): each member's own block), framed in atomic pieces (<= PIPE_BUF), into every
// other member's pipe and reads the others' from its own; pieces carry the
// collective's sequence number, so a member already in the next allgather
// cannot be confused with this one. A member that does not answer within
// 20 s makes allgather() return false (never a hang).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/bootstrap.h"

namespace mlxa2a::test {

class ForkGroupWiring {
 public:
  explicit ForkGroupWiring(int n);  // n pipes; fds stay open across fork
  ~ForkGroupWiring();
  ForkGroupWiring(const ForkGroupWiring&) = delete;
  ForkGroupWiring& operator=(const ForkGroupWiring&) = delete;
  int size() const { return static_cast<int>(read_.size()); }
  int read_fd(int member) const { return read_[static_cast<std::size_t>(member)]; }
  int write_fd(int member) const { return write_[static_cast<std::size_t>(member)]; }
  bool ok() const { return ok_; }

 private:
  std::vector<int> read_;
  std::vector<int> write_;
  bool ok_ = true;
};

class ForkGroup final : public GroupBootstrap {
 public:
  ForkGroup(const ForkGroupWiring& wiring, int rank) : w_(wiring), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_.size(); }
  bool allgather(const void* mine, void* all, std::size_t len) override;
  bool alltoall(const void* mine, void* theirs, std::size_t len) override;

 private:
  bool exchange(const char* mine, std::size_t stride, void* all, std::size_t len);
  struct Piece;
  const ForkGroupWiring& w_;
  int rank_;
  std::uint32_t seq_ = 0;
  std::vector<std::vector<char>> early_;  // pieces of the next collective read too soon
};

}  // namespace mlxa2a::test
