// A segment shared by all ranks of one node, created collectively.
//
// Contract: create() is collective over the Bootstrap's ranks. Local rank 0
// creates the segment, fills in `params` (opaque here: the owner's layout
// choices) and broadcasts the name; everybody attaches, checks the header,
// registers its pid, and after a barrier the name is unlinked. Every rank
// computes the user area's size from (local_size, root's params), so all
// agree. Failure returns the same Status on every rank unless the Bootstrap
// broke. Move-only; destruction is local (unmap).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/shm/bootstrap.h"
#include "core/shm/options.h"
#include "core/shm/segment.h"
#include "core/shm/status.h"

namespace mlxa2a::shm {

using SegmentParams = std::array<std::uint64_t, 4>;

class NodeSegment {
 public:
  struct Request {
    // params and probe_cma are taken from local rank 0 only.
    SegmentParams params{};
    // Bytes of the user area for (local_size, params); 0 = invalid params.
    std::function<std::size_t(int, const SegmentParams&)> user_bytes;
    bool probe_cma = false;  // find out whether every rank can read every peer
  };

  NodeSegment() = default;
  static Status create(Bootstrap& boot, const Options& opt, const Request& req, NodeSegment& out);

  int local_rank() const noexcept { return me_; }
  int local_size() const noexcept { return n_; }
  const SegmentParams& params() const noexcept { return params_; }
  char* user() const noexcept { return user_; }
  int pid(int rank) const noexcept { return pids_[static_cast<std::size_t>(rank)]; }
  // pid to watch for liveness, 0 if it was not visible from here at setup.
  int watch_pid(int rank) const noexcept { return watch_pids_[static_cast<std::size_t>(rank)]; }
  // Set by any rank whose collective operation failed; others give up.
  std::atomic<std::uint32_t>* failed_flag() const noexcept;
  bool cma_usable() const noexcept { return cma_usable_; }
  const std::string& name() const noexcept { return seg_.name(); }
  // The pages local rank 0 got for it (Options::hugepages; the same on every rank).
  Pages pages() const noexcept { return pages_; }

 private:
  Segment seg_;
  Pages pages_ = Pages::normal;
  int me_ = 0;
  int n_ = 0;
  SegmentParams params_{};
  char* user_ = nullptr;
  std::vector<int> pids_;
  std::vector<int> watch_pids_;
  bool cma_usable_ = false;
};

// Reads `len` bytes at address `remote` of process `pid` into `local`.
bool cma_read(int pid, void* local, std::uint64_t remote, std::size_t len) noexcept;

}  // namespace mlxa2a::shm
