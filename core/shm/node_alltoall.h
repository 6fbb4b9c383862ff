// Alltoall among the ranks of one node through shared memory (MPI-free;
// protocols: docs/shm.md).
//
// Contract
// * create() is collective over the Bootstrap's ranks; the segment's name is
//   unlinked once all have attached, so a later crash leaves nothing in
//   /dev/shm. Failure returns a Status on every rank (unless the Bootstrap
//   itself broke) and never aborts.
// * run() is collective: every local rank calls it equally often with the
//   same bytes_per_peer. Block j of send goes to rank j, block j of recv
//   comes from rank j; send and recv must not overlap (pack MPI_IN_PLACE
//   first). run() returns once this rank's recv is complete and no peer
//   still reads its send: back-to-back calls need no barrier.
// * A dead peer, a timeout, an abort or a peer's reported failure end the
//   call with a Status and break the instance (later: Status::broken).
// * A peer with another bytes_per_peer (an erroneous program, 0-byte calls
//   included) ends the call on every rank with size_mismatch within about
//   the spin time (sizes are compared in the first round). Not broken, but
//   sequence numbers may differ: every rank must resync() with the
//   element-wise MAX of all sync_point()s before the next run(). Sizes that
//   send ranks outside the engine (PMPI) are the caller's to avoid.
// * Not thread-safe (one thread per instance, as MPI collectives on one
//   communicator). Destruction is local. Path choice depends only on
//   bytes_per_peer and values agreed at creation: alike on all ranks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/shm/bootstrap.h"
#include "core/shm/layout.h"
#include "core/shm/lines.h"
#include "core/shm/options.h"
#include "core/shm/node_segment.h"
#include "core/shm/status.h"
#include "core/shm/wait.h"

namespace mlxa2a::shm {

// local: nothing crosses processes; line: lines.h; copy: through the slots;
// cma: single copy with process_vm_readv.
enum class Path { local, line, copy, cma };
const char* to_string(Path p) noexcept;

class NodeAlltoall {
 public:
  [[nodiscard]] static Status create(Bootstrap& boot, const Options& opt,
                                     std::unique_ptr<NodeAlltoall>& out) noexcept;
  ~NodeAlltoall();
  NodeAlltoall(const NodeAlltoall&) = delete;
  NodeAlltoall& operator=(const NodeAlltoall&) = delete;

  [[nodiscard]] Status run(const void* send, void* recv, std::size_t bytes_per_peer) noexcept;
  // Through `path` (the same on every rank; docs/tune.md); one it cannot
  // take (!can_take) runs as path_for(bytes_per_peer), alike on every rank.
  [[nodiscard]] Status run(const void* send, void* recv, std::size_t bytes_per_peer,
                           Path path) noexcept;
  // A call that moves nothing, for a caller serving it elsewhere (PMPI) while
  // a peer may enter run() with another size (docs/shm.md, "Sizes that differ
  // across ranks"). Collective and counted like run(): ok once every peer
  // announced this size, size_mismatch as from run(); other errors as run()'s.
  [[nodiscard]] Status check_sizes(std::size_t bytes_per_peer) noexcept;
  // Identical on all local ranks: line for 1..line_max(), cma when every
  // rank can read every peer, copy always (n > 1).
  bool can_take(Path path, std::size_t bytes_per_peer) const noexcept;

  // For a rank that cannot take part in a run() its peers entered: breaks the
  // instance and sets the node's failure flag (their run(): peer_failed
  // instead of waiting forever). Local, never blocks.
  void abandon() noexcept;

  // Not broken and no node failure reported: may serve another communicator
  // of the same ranks (core/mpi/engine_pool.h).
  bool healthy() const noexcept;
  // Equal on every rank attached to this segment, never 0.
  std::uint64_t id() const noexcept;
  // Takes opt's abort callback (a new communicator's); the rest is fixed. Local.
  void rebind(const Options& opt) noexcept;

  // After size_mismatch (see the contract).
  std::array<std::uint64_t, 2> sync_point() const noexcept { return {seq_, calls_}; }
  void resync(const std::array<std::uint64_t, 2>& agreed) noexcept {
    seq_ = agreed[0];
    calls_ = agreed[1];
  }

  Path path_for(std::size_t bytes_per_peer) const noexcept;

  int local_rank() const noexcept { return me_; }
  int local_size() const noexcept { return n_; }
  bool cma_enabled() const noexcept { return cma_threshold_ != 0; }
  // CMA works between every pair (probed at creation), picked or not.
  bool cma_usable() const noexcept { return cma_usable_; }
  // Largest bytes_per_peer served in line mode (0: line mode off).
  std::size_t line_max() const noexcept { return line_max_; }
  std::size_t slot_capacity() const noexcept { return capacity_; }
  // Already unlinked once create() returned.
  const std::string& segment_name() const noexcept { return seg_.name(); }

 private:
  NodeAlltoall(int me, int n, const Options& opt);

  Status setup(Bootstrap& boot, const Options& opt);
  void announce(std::size_t bytes) noexcept;
  Status settle(Status st) noexcept;  // run()'s error rule
  Status run_empty(std::size_t bytes) noexcept;
  Status run_lines(const char* send, char* recv, std::size_t bytes) noexcept;
  Status run_line_pair(const char* send, char* recv, std::size_t bytes) noexcept;
  // A reader's block in a writer's line area, and the word it must show.
  struct LineBlock {
    const char* area;
    std::size_t first, last;
    std::uint64_t word;
  };
  [[gnu::noinline]] Status wait_lines(const LineBlock& b, int j, std::size_t bytes,
                                      lines::Check& c) const noexcept;
  Status run_copy(const char* send, char* recv, std::size_t bytes) noexcept;
  Status run_cma(const char* send, char* recv, std::size_t bytes) noexcept;

  std::atomic<std::uint64_t>& slot_seq(int rank, std::uint64_t parity) const noexcept {
    return *reinterpret_cast<std::atomic<std::uint64_t>*>(slots_[2 * rank + parity]);
  }
  std::atomic<std::uint64_t>& slot_bytes(int rank, std::uint64_t parity) const noexcept {
    return *reinterpret_cast<std::atomic<std::uint64_t>*>(slots_[2 * rank + parity] +
                                                          layout::kSlotBytesOffset);
  }
  char* slot_data(int rank, std::uint64_t parity) const noexcept {
    return slots_[2 * rank + parity] + layout::kSlotDataOffset;
  }
  // What a wait for `rank` in this call compares (CallProbe).
  CallProbe probe(int rank, std::size_t bytes) const noexcept {
    return CallProbe{&calls_info_[static_cast<std::size_t>(rank)]->word,
                     layout::call_word(calls_, bytes)};
  }

  int me_;
  int n_;
  NodeSegment seg_;
  std::size_t capacity_ = 0;        // data bytes per slot
  std::size_t max_bytes_ = 0;       // largest bytes_per_peer with no overflow
  std::size_t cma_threshold_ = 0;   // 0 = CMA off (agreed at creation)
  bool cma_usable_ = false;         // probe passed on every rank (agreed)
  std::uint64_t seq_ = 0;           // calls/rounds done; equal on all ranks
  std::uint64_t calls_ = 0;         // run() calls with local_size > 1; equal on all ranks
  bool broken_ = false;
  std::size_t line_max_ = 0;        // largest bytes_per_peer served in line mode
  std::vector<char*> lines_;        // line-mode areas, [2 * rank + parity]
  std::vector<char*> slots_;        // [2 * rank + parity]
  std::vector<layout::DoneFlag*> done_;
  std::vector<layout::CallInfo*> calls_info_;
  Waiter waiter_;
};

}  // namespace mlxa2a::shm
