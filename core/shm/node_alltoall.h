// Alltoall among the ranks of one node through shared memory (MPI-free).
//
// Contract
// * Creation is collective over the Bootstrap's ranks: local rank 0 creates
//   the segment and broadcasts its name, the others attach, pids are exchanged
//   through the segment, and the name is unlinked as soon as all ranks have
//   attached (nothing is left in /dev/shm even if the job crashes later).
//   Failure returns a Status on every rank and never aborts; when create()
//   fails on one rank it fails on all of them unless the Bootstrap itself broke.
// * run() is collective: every local rank calls it the same number of times
//   with the same bytes_per_peer. send and recv hold local_size blocks of
//   bytes_per_peer bytes; block j of send goes to rank j, block j of recv
//   comes from rank j. send and recv must not overlap (pack MPI_IN_PLACE into
//   a temporary first). run() blocks until this rank's recv is complete and no
//   peer still reads this rank's send. Back-to-back calls need no barrier.
// * Errors: a dead peer, a timeout, an abort request or a failure reported by
//   another rank end the call with a Status; the instance is then broken and
//   every later run() returns Status::broken. No exception escapes.
// * A peer that called with another bytes_per_peer (an erroneous program)
//   ends the call on every rank with Status::size_mismatch, within about the
//   spin time (every rank compares its size with every peer's in the call's
//   first round: in the line words, the slot header, or while waiting, the
//   peer's CallInfo). 0-byte calls take part too (they wait for every peer's
//   CallInfo). The instance is not broken, but the ranks' sequence numbers
//   may differ: every rank must call sync_point(), agree on the element-wise
//   maximum (e.g. an allreduce) and call resync() with it before the next
//   run(). All ranks have left run() by then, so no area is in use.
//   Sizes that send ranks to different paths outside the engine (PMPI) are
//   the caller's to avoid.
// * Not thread-safe: one thread at a time per instance (MPI semantics for
//   collectives on one communicator). Distinct instances are independent.
// * Destruction is local (no communication): it unmaps the segment.
// * Path choice depends only on bytes_per_peer and values agreed at creation,
//   so all ranks always take the same path.
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

// local: nothing crosses processes; line: small calls through per-line
// sequence words (lines.h); copy: copy-in/copy-out through the slots; cma:
// single copy with process_vm_readv.
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
  // run() through a given path instead of path_for(bytes_per_peer) (measured
  // selection, docs/tune.md). Every local rank must pass the same path. A
  // path this instance cannot take for the size (!can_take) runs as
  // path_for(bytes_per_peer), alike on every rank.
  [[nodiscard]] Status run(const void* send, void* recv, std::size_t bytes_per_peer,
                           Path path) noexcept;
  // A call of this instance that moves nothing: for a caller that serves this
  // call elsewhere (PMPI) while a peer may enter run() with another size
  // (docs/shm.md, "Size checks"). Collective like run() and counted as a
  // call: it returns Status::ok once every peer has announced this call with
  // bytes_per_peer, Status::size_mismatch (on every rank, as from run()) if
  // one announced another size; other errors break the instance as run()'s.
  [[nodiscard]] Status check_sizes(std::size_t bytes_per_peer) noexcept;
  // Whether run() can serve bytes_per_peer through path (identical on all
  // local ranks): line from 1 byte up to line_max(), cma when every rank can read every
  // peer, copy always (n > 1).
  bool can_take(Path path, std::size_t bytes_per_peer) const noexcept;

  // For a caller that cannot take part in a run() its peers have entered (it
  // could not prepare its buffers): marks this instance broken and sets the
  // node's failure flag, so the peers' run() ends with Status::peer_failed
  // instead of waiting forever. Local, never blocks.
  void abandon() noexcept;

  // Not broken, and no rank of the node has reported a failure: the instance
  // may serve another communicator of the same ranks (core/mpi/engine_pool.h).
  bool healthy() const noexcept;
  // A number naming this segment, equal on every rank attached to it and
  // never 0 (a hash of the segment's unique name).
  std::uint64_t id() const noexcept;
  // Takes opt's abort callback (the new communicator's) for later waits;
  // every other option was fixed at creation. Local.
  void rebind(const Options& opt) noexcept;

  // After Status::size_mismatch (see the contract): this rank's position, and
  // the restart from the agreed element-wise maximum of every rank's.
  std::array<std::uint64_t, 2> sync_point() const noexcept { return {seq_, calls_}; }
  void resync(const std::array<std::uint64_t, 2>& agreed) noexcept {
    seq_ = agreed[0];
    calls_ = agreed[1];
  }

  // The path run() takes for this size (identical on all local ranks).
  Path path_for(std::size_t bytes_per_peer) const noexcept;

  int local_rank() const noexcept { return me_; }
  int local_size() const noexcept { return n_; }
  bool cma_enabled() const noexcept { return cma_threshold_ != 0; }
  // CMA works between every pair of local ranks (probed at creation), whether
  // or not path_for() ever picks it.
  bool cma_usable() const noexcept { return cma_usable_; }
  // Largest bytes_per_peer served in line mode (0: line mode off).
  std::size_t line_max() const noexcept { return line_max_; }
  std::size_t slot_capacity() const noexcept { return capacity_; }
  // Name the segment had in /dev/shm (already unlinked once create() returned).
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
