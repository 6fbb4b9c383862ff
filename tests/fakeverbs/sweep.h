// fakeverbs: removing what dead processes left in rendezvous directories.
//
// A process killed by SIGKILL (or crashed) never runs its exit cleanup, so
// its "<pid>.*" files and the "qpn.*" / "gid.*" links to them stay in the
// rendezvous directory (rendezvous.h) -- a CQ ring alone can be hundreds of
// MB of /dev/shm.  Every process therefore sweeps, the first time it uses
// a rendezvous directory, that directory and its sibling "fakeverbs-*"
// directories (same parent, ours): entries whose owner is gone are removed,
// and sibling directories left empty are removed too.  One line on stderr
// says what went (unless FAKEVERBS_QUIET=1).
//
// Never a live process's entry: an entry is removed only when no process
// has its pid, or when the process now holding that pid started after the
// entry was last modified (the pid was reused).  Concurrent sweepers are
// harmless: what another one removed first (ENOENT) is simply not counted,
// and a directory removed under a process that is about to create its
// first entry is made again by that process (open_new_entry, rendezvous.h).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace fakeverbs {

// What one start's sweep removed, for its log line.
struct SweepTally {
  int entries = 0;
  int dirs = 0;
  uint64_t bytes = 0;    // memory the removed files held (allocated blocks)
  std::string examples;  // the first few paths removed, space-separated
};

// True when the process that created an entry of `pid`, last modified at
// `st.st_mtim`, no longer exists: no process has that pid, or the one that
// has it started after the entry was last modified (reused pid).
bool entry_owner_gone(pid_t pid, const struct stat& st);

// Removes the entries of `dir` whose owner is gone, and (at exit) those of
// `self_too`; adds what it removed to `tally` when not null.
void sweep_dir(const std::string& dir, pid_t self_too, SweepTally* tally);

// A process's first use of `dir`: sweeps it and its sibling fakeverbs-*
// directories, removes the siblings left empty, logs once what it removed.
void sweep_at_start(const std::string& dir);

}  // namespace fakeverbs
