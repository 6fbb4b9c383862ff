// fakeverbs: shared files in a per-job rendezvous directory.
//
// Everything another process must see -- a QP's receive queue and state, a
// CQ's ring, a process's MR table -- lives in a file mapped MAP_SHARED in
// the rendezvous directory.  Files are named after the owning pid
// ("<pid>.qp.<n>", "<pid>.cq.<n>", "<pid>.mr"), plus one symlink per QP
// ("qpn.<port address>.<qpn>" -> "<pid>.qp.<n>") through which a peer that
// knows only (LID or GID, QPN) -- exactly what an application exchanges on
// hardware -- finds the QP.
//
// Directory: $FAKEVERBS_DIR, else /dev/shm/fakeverbs-<uid>-<job> where <job>
// is $FAKEVERBS_JOB, else $PMIX_NAMESPACE (Open MPI / PMIx), else $PMI_ID-less
// "default".  Entries whose pid is dead are ignored, and removed by the next
// process to start (sweep.h: its directory and the sibling fakeverbs-*
// ones); a process removes its own entries when it destroys the objects
// and at exit, and the last one out removes the directory.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <cstddef>
#include <string>

namespace fakeverbs {

const std::string& rendezvous_dir();
std::string rendezvous_path(const std::string& name);
// open(2) of a new entry (O_CREAT | O_CLOEXEC | flags, mode 0600) that makes
// the directory again if another job's sweep removed it (sweep.h).
int open_new_entry(const std::string& name, int flags);

// A MAP_SHARED mapping of a rendezvous file.  Movable, not copyable; the
// owner (creator) unlinks the file on destruction, a mere user only unmaps.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Creates (O_EXCL) a zero-filled file of `size` bytes; false + errno on error.
  bool create(const std::string& name, size_t size);
  // Maps an existing file; false if it does not exist or is too small.
  bool open(const std::string& name);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset();

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

// Process-shared robust mutex placed in a shared file.  If a process dies
// holding it, the next locker repairs it instead of hanging forever.
void shared_mutex_init(pthread_mutex_t* m);
class SharedLock {
 public:
  explicit SharedLock(pthread_mutex_t* m);
  ~SharedLock();
  SharedLock(const SharedLock&) = delete;
  SharedLock& operator=(const SharedLock&) = delete;

 private:
  pthread_mutex_t* m_;
};

bool pid_alive(pid_t pid);
// Parses the owning pid of a rendezvous file name ("<pid>.xxx"), 0 if none.
pid_t owner_pid_of(const std::string& name);

// Publishes "qpn.<key>.<qpn>" -> target.  False (EEXIST) if a live process
// already owns that name; a dead owner's link is replaced.
bool publish_link(const std::string& link, const std::string& target);
// Resolves a link to its target file name; empty if absent or owner dead.
std::string resolve_link(const std::string& link);
void remove_entry(const std::string& name);

}  // namespace fakeverbs
