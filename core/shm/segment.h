// One POSIX shared-memory segment (shm_open + mmap): the single owner of the
// mapping and, for the creator, of the name in /dev/shm.
//
// Contract: move-only. The destructor unmaps and, if this object created the
// name and has not unlinked it yet, unlinks it; it never throws. Not
// thread-safe (one owner). The mapping stays valid after unlink() - the name
// only exists so that other ranks can attach - so callers unlink as soon as
// every rank has attached, and a crash afterwards leaves nothing behind.
#pragma once

#include <cstddef>
#include <string>

#include "core/shm/status.h"

namespace mlxa2a::shm {

class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates a new name (O_EXCL), reserves `bytes` of memory for it (so a full
  // /dev/shm fails here, not as SIGBUS later) and maps it zero-filled.
  static Status create(const std::string& name, std::size_t bytes, Segment& out);
  // Maps an existing segment of exactly `bytes`.
  static Status attach(const std::string& name, std::size_t bytes, Segment& out);

  void unlink() noexcept;  // no-op unless we created the name and still own it

  void* data() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& name() const noexcept { return name_; }

 private:
  void reset() noexcept;

  void* base_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;     // without the leading '/'
  bool owns_name_ = false;
};

// "<prefix>-<uid>-<pid>-<seq>-<random>" (+ "-<tag>" when tag is not empty),
// unique within this process; no leading '/'. <random> is 16 hex digits from
// getrandom(2): a local user who creates the names a job would use next
// cannot make every creation fail (O_EXCL) and push the job onto PMPI.
// <uid>-<pid> stays in front for remove_stale_segments().
std::string make_segment_name(const std::string& prefix, const std::string& tag);

// Unlinks /dev/shm/<prefix>-<our uid>-<pid>-* whose creator pid no longer
// exists and which are regular files owned by our effective uid (checked on
// an O_NOFOLLOW open: another user's file or a symlink of a matching name is
// left alone). Returns how many were removed. Call once at team setup: leftovers
// only exist if a job crashed between creating and unlinking a segment.
// Caveat: a pid is judged in our pid namespace.
int remove_stale_segments(const std::string& prefix) noexcept;

// True if a process with this pid exists and is not a zombie.
bool process_alive(int pid) noexcept;

}  // namespace mlxa2a::shm
