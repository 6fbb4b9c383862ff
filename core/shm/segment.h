// One POSIX shared-memory segment (shm_open + mmap): the single owner of the
// mapping and, for the creator, of the name in /dev/shm.
//
// Contract: move-only, not thread-safe. The destructor unmaps and unlinks a
// name it created and still owns; never throws. The mapping outlives
// unlink(), so callers unlink once every rank attached: a later crash
// leaves nothing behind.
#pragma once

#include <cstddef>
#include <string>

#include "core/shm/pages.h"
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
  // /dev/shm fails here, not as SIGBUS later) and maps it zero-filled, on
  // the pages asked if it can (pages.h; else thp, else normal: pages() says).
  static Status create(const std::string& name, std::size_t bytes, Segment& out,
                       Pages pages = Pages::normal);
  // Maps an existing segment of exactly `bytes` (a memfd one: at least);
  // `thp`: advise huge pages on our mapping too.
  static Status attach(const std::string& name, std::size_t bytes, Segment& out,
                       bool thp = false);
  // memfd_create(`flags` | MFD_CLOEXEC), named "memfd:<pid>:<fd>": attach()
  // opens /proc/<pid>/fd/<fd>; unlink() closes the descriptor.
  static Status create_memfd(const std::string& name, std::size_t bytes, unsigned flags,
                             std::size_t page, Segment& out);

  // Removes the name (or closes a memfd segment's descriptor); a no-op
  // unless we created it and still own it.
  void unlink() noexcept;
  Pages pages() const noexcept { return pages_; }

  void* data() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& name() const noexcept { return name_; }

 private:
  void reset() noexcept;

  void* base_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;     // without the leading '/'
  bool owns_name_ = false;
  std::size_t map_bytes_ = 0;  // mapped (a memfd's size rounded up to its pages)
  int fd_ = -1;                // a memfd segment's descriptor until unlink()
  Pages pages_ = Pages::normal;
};

// "<prefix>-<uid>-<pid>-<seq>-<random>[-<tag>]", unique in this process, no
// leading '/'. <random> (getrandom) keeps another user from pre-creating our
// next names to make O_EXCL fail (docs/shm.md, "Segment"); <uid>-<pid> lead
// for remove_stale_segments().
std::string make_segment_name(const std::string& prefix, const std::string& tag);

// Unlinks /dev/shm/<prefix>-<our uid>-<pid>-* whose creator pid is gone, if
// regular files of our effective uid (checked on an O_NOFOLLOW open: another
// user's file or a symlink is left alone); returns how many. Leftovers come
// only from a crash between create and unlink. Pids are judged in our pid
// namespace.
int remove_stale_segments(const std::string& prefix) noexcept;

// True if a process with this pid exists and is not a zombie.
bool process_alive(int pid) noexcept;

}  // namespace mlxa2a::shm
