// Set-up communication among a group of processes (a team's leaders),
// transport-neutral: the RDMA transport exchanges its addresses through it.
//
// Contract: set-up only, never on the hot path. Every member calls the same
// sequence of allgather()s and alltoall()s collectively, each with the same
// len. Returning
// false means the collective failed on this member; the caller then gives up
// (Status::bootstrap_failed) — but must still take part in the collectives
// its peers go on with, so callers keep every member's sequence alike.
// Implementations: core/mpi/group_bootstrap.h (PMPI on a communicator) and
// tests/mlx5/fork_group.h (forked processes, pipes).
#pragma once

#include <cstddef>

namespace mlxa2a {

struct GroupBootstrap {
  virtual ~GroupBootstrap() = default;
  virtual int rank() const = 0;  // 0 .. size()-1
  virtual int size() const = 0;  // >= 1
  // all receives size() * len bytes: member r's `mine` at r * len.
  virtual bool allgather(const void* mine, void* all, std::size_t len) = 0;
  // Member r's mine[q * len ..) goes to member q, which receives it at
  // theirs[r * len ..): what each pair says to each other, O(size) bytes per
  // member where an allgather of per-pair tables is O(size^2).
  virtual bool alltoall(const void* mine, void* theirs, std::size_t len) = 0;
};

// What a member's collectives moved (sent + received bytes, collectives),
// counted by wrapping its bootstrap: the RDMA set-up reports them
// (MLXA2A_COLL_STATS) and a test shows them linear in the group's size.
class CountingBootstrap final : public GroupBootstrap {
 public:
  explicit CountingBootstrap(GroupBootstrap& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  bool allgather(const void* mine, void* all, std::size_t len) override {
    count(len);
    return inner_.allgather(mine, all, len);
  }
  bool alltoall(const void* mine, void* theirs, std::size_t len) override {
    count(len);
    return inner_.alltoall(mine, theirs, len);
  }
  std::size_t bytes() const { return bytes_; }
  std::size_t collectives() const { return collectives_; }

 private:
  // Either kind: len to and from every other member.
  void count(std::size_t len) {
    bytes_ += 2 * len * static_cast<std::size_t>(size() - 1);
    ++collectives_;
  }
  GroupBootstrap& inner_;
  std::size_t bytes_ = 0;
  std::size_t collectives_ = 0;
};

}  // namespace mlxa2a
