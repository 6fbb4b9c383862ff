// Fan-in / fan-out staging for the inter-node engine: a shared area all
// local ranks map, plus the two node-wide handoffs around it.
//
// One engine call, with some local ranks acting as leaders:
//   begin()                 every rank; selects this call's double-buffered areas
//   ... write own blocks into in() (e.g. with copy_blocks) ...
//   arrive()                every rank: my fan-in data is in place
//   wait_arrived(ranks)     leader: those ranks' fan-in data is readable
//   ... leader reads in(), exchanges over the network, writes out() ...
//   release()               leader: my fan-out data is in place
//   wait_released(leaders)  every rank: those leaders' fan-out data is readable
//   ... read own results out of out() ...
//
// Reuse rule (why no extra "done" flags): call c uses areas of parity c & 1,
// last used by call c-2. The caller must make
//   * wait_arrived(R) cover every rank whose in() data the leader reads and
//     every rank that reads the leader's out() data, and
//   * wait_released(L) cover every leader that reads this rank's in() data and
//     every leader whose out() data this rank reads.
// Then every read of call c-2's data happened before the reader's signal in
// call c-1, which the writer acquired before writing in call c (docs/shm.md).
// A leader that is also a rank of its own group does both roles.
//
// Pipelined calls (docs/hier.md "Pipelined rounds": the full rule): the
// *_at forms name a call by its sequence number, so call c+1's in-area may
// fill while call c is exchanged. The reuse rule then no longer holds by
// itself: readers signal finish_at(c) once done with call c's areas, and a
// writer waits with wait_finished() for every reader of what it overwrites.
// Sequence 0 names no call: waiting for it returns at once.
//
// When oversubscribed, long waits sleep and every signal wakes the flag's
// sleepers (wait.h). Errors as NodeAlltoall's; after one the stage is
// broken. Not thread-safe. Creation collective; destruction local.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/shm/bootstrap.h"
#include "core/shm/node_segment.h"
#include "core/shm/options.h"
#include "core/shm/status.h"
#include "core/shm/wait.h"

namespace mlxa2a::shm {

class NodeStage {
 public:
  // Sizes of one fan-in / fan-out area (each double-buffered); rank 0's count.
  [[nodiscard]] static Status create(Bootstrap& boot, const Options& opt, std::size_t in_bytes,
                                     std::size_t out_bytes, std::unique_ptr<NodeStage>& out) noexcept;
  NodeStage(const NodeStage&) = delete;
  NodeStage& operator=(const NodeStage&) = delete;

  // Starts the next call; returns its sequence number (1, 2, ...).
  std::uint64_t begin() noexcept { return ++seq_; }
  std::uint64_t seq() const noexcept { return seq_; }
  char* in() const noexcept { return in_[seq_ & 1]; }
  char* out() const noexcept { return out_[seq_ & 1]; }
  std::size_t in_bytes() const noexcept { return in_bytes_; }
  std::size_t out_bytes() const noexcept { return out_bytes_; }
  // The areas of either parity are fixed for the stage's life, so a
  // transport may register them once (core/hier/transport.h).
  int parity() const noexcept { return static_cast<int>(seq_ & 1); }
  char* in_area(int parity) const noexcept { return in_[parity & 1]; }
  char* out_area(int parity) const noexcept { return out_[parity & 1]; }

  // The signals of the latest begin()'s call. note: one word published with
  // the signal (docs/hier.md "Sizes that differ"), readable by a rank that
  // waited for the signal until the writer signals call seq + 2: notes are
  // kept per parity, so a writer may signal the next call while a reader
  // still reads this one's (docs/hier.md "A rank sent to PMPI").
  [[nodiscard]] Status arrive(std::uint64_t note = 0) noexcept { return arrive_at(seq_, note); }
  [[nodiscard]] Status wait_arrived(std::span<const int> ranks) noexcept {
    return wait_arrived(ranks, seq_);
  }
  [[nodiscard]] Status release(std::uint64_t note = 0) noexcept { return release_at(seq_, note); }
  [[nodiscard]] Status wait_released(std::span<const int> leaders) noexcept {
    return wait_released(leaders, seq_);
  }
  // The same for call `seq` (pipelined calls), plus the finished signal.
  [[nodiscard]] Status arrive_at(std::uint64_t seq, std::uint64_t note = 0) noexcept;
  [[nodiscard]] Status wait_arrived(std::span<const int> ranks, std::uint64_t seq) noexcept;
  [[nodiscard]] Status release_at(std::uint64_t seq, std::uint64_t note = 0) noexcept;
  [[nodiscard]] Status wait_released(std::span<const int> leaders, std::uint64_t seq) noexcept;
  [[nodiscard]] Status finish_at(std::uint64_t seq, std::uint64_t note = 0) noexcept;
  [[nodiscard]] Status wait_finished(std::span<const int> ranks, std::uint64_t seq) noexcept;
  std::uint64_t arrived_note(int rank, std::uint64_t seq) const noexcept {
    return note_of(arrived_[static_cast<std::size_t>(rank)], seq);
  }
  std::uint64_t released_note(int leader, std::uint64_t seq) const noexcept {
    return note_of(released_[static_cast<std::size_t>(leader)], seq);
  }
  std::uint64_t finished_note(int rank, std::uint64_t seq) const noexcept {
    return note_of(finished_[static_cast<std::size_t>(rank)], seq);
  }
  // As NodeAlltoall::abandon().
  void abandon() noexcept { (void)fail(Status::broken); }
  // A pooled engine's health (core/mpi/engine_pool.h).
  bool healthy() const noexcept {
    return !broken_ && seg_.failed_flag()->load(std::memory_order_acquire) == 0;
  }
  // As NodeAlltoall::rebind().
  void rebind(const Options& opt) noexcept;

  int local_rank() const noexcept { return seg_.local_rank(); }
  Pages pages() const noexcept { return seg_.pages(); }  // what backs the areas
  int local_size() const noexcept { return seg_.local_size(); }

 private:
  explicit NodeStage(const Options& opt) : waiter_(opt, nullptr) {}
  enum class Signal { arrived, released, finished };
  Status signal(Signal which, std::uint64_t seq, std::uint64_t note) noexcept;
  Status wait_all(std::span<const int> ranks, Signal which, std::uint64_t seq) noexcept;
  std::vector<std::atomic<std::uint64_t>*>& flags(Signal which) noexcept {
    return which == Signal::arrived    ? arrived_
           : which == Signal::released ? released_
                                       : finished_;
  }
  Status fail(Status st) noexcept;
  // Call seq's note: the word after its flag for its parity (same line).
  static std::atomic<std::uint64_t>* note_word(std::atomic<std::uint64_t>* flag,
                                               std::uint64_t seq) noexcept {
    return flag + 1 + (seq & 1);
  }
  static std::uint64_t note_of(std::atomic<std::uint64_t>* flag, std::uint64_t seq) noexcept {
    return note_word(flag, seq)->load(std::memory_order_relaxed);
  }

  NodeSegment seg_;
  std::uint64_t seq_ = 0;
  bool broken_ = false;
  std::size_t in_bytes_ = 0;
  std::size_t out_bytes_ = 0;
  char* in_[2] = {nullptr, nullptr};
  char* out_[2] = {nullptr, nullptr};
  std::vector<std::atomic<std::uint64_t>*> arrived_;   // per rank
  std::vector<std::atomic<std::uint64_t>*> released_;  // per rank (leaders use theirs)
  std::vector<std::atomic<std::uint64_t>*> finished_;  // per rank (pipelined calls)
  Waiter waiter_;
};

}  // namespace mlxa2a::shm
