// Tuning knobs of the shared-memory stage (docs/shm.md, "Options": defaults
// and what they mean). The MLXA2A_SHM_* switches reach it through
// options_from() (core/config/shm.h: the one config header core/shm includes).
//
// [layout] fields decide the segment layout or a call's path, so they must
// agree on all local ranks: the creator's (local rank 0) values are written
// into the segment and used by everybody. The other fields are rank-local.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/config/shm.h"

namespace mlxa2a::shm {

struct Options {
  // Most `pause`s before sched_yield() (the adaptive budget, wait.h, may spin
  // fewer): ~20-40 us covers a peer a few microseconds behind.
  std::uint32_t spin_iterations = 2000;

  // [layout] Local ranks outnumber their cores (the caller computes it from
  // the affinity masks): waits spin a handful of times, since the awaited
  // peer needs our core; NodeStage's waits sleep; the _oversubscribed values apply.
  bool oversubscribed = false;

  // [layout] Bytes per peer from which run() reads each block with
  // process_vm_readv instead of copying through the slots; 0 = never (np=2:
  // copying won at 32 KiB, CMA from 64 KiB). Off on all ranks when the probe
  // at creation finds a rank that cannot read a peer (ptrace, pid namespaces).
  std::size_t cma_threshold = 65536;

  // [layout] When `oversubscribed`: a read competes for a core with the peer
  // it reads from, and large slots beat or tied CMA at 64 KiB-1 MiB
  // (bench/results/single-node.md), hence 0 = never.
  std::size_t cma_threshold_oversubscribed = 0;

  // [layout] Small calls ((local_size - 1) * bytes_per_peer <= 3584) in line
  // mode (core/shm/lines.h); false: through the slots (tests, comparisons).
  bool line_mode = true;
  // [layout] Bytes of each of a rank's two slots (double-buffered), at least
  // 64 * local_size; larger calls are pipelined through it in rounds.
  std::size_t slot_capacity = 131072;

  // [layout] When `oversubscribed`: each round costs context switches (~8 us
  // at 4 ranks on 2 cores, ~30 at 8), so fewer, larger rounds win.
  std::size_t slot_capacity_oversubscribed = 524288;

  // Segment names (segment.h make_segment_name): the creator's are used.
  // The prefix holds no '/' or '-'; the tag no '/'.
  std::string name_prefix = "mlxa2a";
  // [layout] choose_pages()'s mode (pages.h): MLXA2A_NET_HUGEPAGES for the
  // multi-node stage (core/mpi/hier_engine.cc), off elsewhere.
  std::string hugepages = "off";
  std::string job_tag;

  // Waits end with Status::timeout after this long; 0 = never (production: a
  // slow rank is not an error; a dead peer is still detected by its pid).
  std::uint32_t timeout_ms = 0;

  // Polled about every millisecond while yielding; true: Status::aborted.
  std::function<bool()> abort_requested;
};

// The one place the MLXA2A_SHM_* switches become shm options.
inline Options options_from(const core::config::ShmSwitches& s) {
  Options o;
  o.cma_threshold = static_cast<std::size_t>(s.cma_threshold);
  o.cma_threshold_oversubscribed = static_cast<std::size_t>(s.cma_threshold_oversubscribed);
  o.slot_capacity = static_cast<std::size_t>(s.slot_size);
  o.slot_capacity_oversubscribed = static_cast<std::size_t>(s.slot_size_oversubscribed);
  return o;
}

}  // namespace mlxa2a::shm
