// Tuning knobs of the shared-memory stage. A plain struct; the MLXA2A_SHM_*
// switches reach it through options_from() below (core/config/shm.h, plain
// data: the one config header core/shm may include).
//
// Fields marked [layout] decide the segment layout or which path a call takes;
// they must agree on all local ranks, so the creator's (local rank 0) values
// are written into the segment and used by everybody - other ranks' values for
// those fields are ignored. The remaining fields are rank-local.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/config/shm.h"

namespace mlxa2a::shm {

struct Options {
  // At most this many busy-wait iterations (one `pause`, ~10-20 ns) before a
  // waiting rank starts calling sched_yield(); the process-wide adaptive budget
  // (wait.h) lowers it while the rank's core is shared. 2000 (~20-40 us):
  // long enough to cover a peer that is a few microseconds behind.
  std::uint32_t spin_iterations = 2000;

  // [layout] True when local ranks outnumber the cores they may run on. Waits
  // then spin at most a handful of iterations before yielding (the peer we
  // wait for needs our core), NodeStage's waits sleep after a few yields
  // (wait.h), and CMA uses cma_threshold_oversubscribed.
  // Suggested: computed by the caller from the affinity masks (default false).
  bool oversubscribed = false;

  // [layout] Bytes per peer from which run() uses one process_vm_readv per
  // block instead of copy-in/copy-out through the segment. 0 = never.
  // Suggested 65536 (np=2: copying beat CMA at 32 KiB per peer, 4.6 vs
  // 5.6 us; CMA wins from 64 KiB). CMA is off on all ranks when the probe at
  // creation shows that some rank cannot read some peer (ptrace policy, pid
  // namespaces).
  std::size_t cma_threshold = 65536;

  // [layout] The same threshold when `oversubscribed`. Each process_vm_readv
  // then competes for a core with the very peer it reads from; measured on 2
  // cores at np=4 and np=8 (bench/results/single-node.md), copying through a large slot
  // beat or tied CMA at every size from 64 KiB to 1 MiB per peer. 0 = never
  // (the suggested value).
  std::size_t cma_threshold_oversubscribed = 0;

  // [layout] Serve small calls in line mode (every cache line carries its own
  // sequence word, so a block's lines travel together; core/shm/lines.h):
  // calls whose (local_size - 1) * bytes_per_peer fits 3584 bytes. Suggested
  // true; false sends them through the slots (tests, comparisons).
  bool line_mode = true;
  // [layout] Bytes of each rank's slot (two slots per rank, double-buffered).
  // Calls whose local_size * bytes_per_peer exceeds it are pipelined through
  // the slot in rounds. Raised to at least 64 * local_size. Suggested 131072
  // (segment = 2 * local_size * slot_capacity, 2 MiB at 8 ranks).
  std::size_t slot_capacity = 131072;

  // [layout] slot_capacity when `oversubscribed`: every round then costs
  // context switches (~8 us at 4 ranks on 2 cores, ~30 us at 8), so fewer,
  // larger rounds win. Suggested 524288 (8 MiB of /dev/shm at 8 ranks).
  std::size_t slot_capacity_oversubscribed = 524288;

  // Segment names are /dev/shm/<name_prefix>-<uid>-<creator pid>-<seq>-<random>[-<job_tag>].
  // [layout] only in that the creator names the segment. The prefix must not
  // contain '/' or '-'; the tag must not contain '/'.
  std::string name_prefix = "mlxa2a";
  // [layout] The pages of the segment (core/shm/pages.h choose_pages()'s
  // mode: auto, hugetlb, thp, off): MLXA2A_NET_HUGEPAGES for the multi-node
  // teams' stage (core/mpi/hier_engine.cc), off elsewhere.
  std::string hugepages = "off";
  std::string job_tag;

  // Waits give up with Status::timeout after this many milliseconds. 0 = no
  // limit (a dead peer is still detected through its pid). Suggested 0 in
  // production (a slow rank is not an error), a few seconds in tests.
  std::uint32_t timeout_ms = 0;

  // Checked about once per millisecond while a wait is yielding; returning
  // true ends the wait with Status::aborted. Optional.
  std::function<bool()> abort_requested;
};

// The MLXA2A_SHM_* switches (core/config/shm.h) over the defaults above: the
// one place they become shm options. The segment holds 2 x ranks x slot bytes.
inline Options options_from(const core::config::ShmSwitches& s) {
  Options o;
  o.cma_threshold = static_cast<std::size_t>(s.cma_threshold);
  o.cma_threshold_oversubscribed = static_cast<std::size_t>(s.cma_threshold_oversubscribed);
  o.slot_capacity = static_cast<std::size_t>(s.slot_size);
  o.slot_capacity_oversubscribed = static_cast<std::size_t>(s.slot_size_oversubscribed);
  return o;
}

}  // namespace mlxa2a::shm
