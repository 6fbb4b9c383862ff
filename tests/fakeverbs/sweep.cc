#include "sweep.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common.h"
#include "rendezvous.h"

namespace fakeverbs {
namespace {

// An entry must predate its pid's current process by this much to count as
// a reused pid's: process start times are known to a clock tick and the
// realtime clock may have been stepped since; a reuse within this window
// is missed (the entry then goes once that process is gone), never a live
// process's entry taken.
constexpr double kReuseMarginSec = 5.0;
constexpr int kExamples = 4;

double seconds_of(const timespec& ts) { return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9; }

// When `pid`'s current process started, on the realtime clock.  The kernel
// gives it in clock ticks since boot (/proc/<pid>/stat field 22, boottime).
bool process_start_realtime(pid_t pid, double* start) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  FILE* f = fopen(path, "re");
  if (!f) return false;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  // The command name may hold spaces and parentheses: fields resume after
  // the last ')', field 3 (state) first; 22 is the start time.
  char* p = strrchr(buf, ')');
  if (!p) return false;
  char* save = nullptr;
  char* tok = strtok_r(p + 1, " ", &save);
  for (int field = 3; tok && field < 22; ++field) tok = strtok_r(nullptr, " ", &save);
  const long hz = sysconf(_SC_CLK_TCK);
  if (!tok || hz <= 0) return false;
  const unsigned long long ticks = strtoull(tok, nullptr, 10);
  timespec real{}, boot{};
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  *start = seconds_of(real) - seconds_of(boot) + double(ticks) / double(hz);
  return true;
}

// The pid an entry belongs to: "<pid>.*", or the target of a "qpn.*" /
// "gid.*" link (rendezvous.h); 0 if none (left alone).
pid_t entry_pid(int dfd, const std::string& name) {
  pid_t pid = owner_pid_of(name);
  if (pid == 0 && (name.rfind("qpn.", 0) == 0 || name.rfind("gid.", 0) == 0)) {
    char target[256];
    ssize_t n = readlinkat(dfd, name.c_str(), target, sizeof target - 1);
    if (n > 0) {
      target[n] = 0;
      pid = owner_pid_of(target);
    }
  }
  return pid;
}

void count(SweepTally* t, const std::string& path, const struct stat& st, bool is_dir) {
  if (!t) return;
  (is_dir ? t->dirs : t->entries) += 1;
  if (!is_dir) t->bytes += uint64_t(st.st_blocks) * 512;
  if (t->entries + t->dirs <= kExamples) t->examples += (t->examples.empty() ? "" : " ") + path;
}

// A sibling rendezvous directory we may sweep: a real directory (never a
// symlink followed elsewhere) named fakeverbs-*, owned by us.
bool sweepable_sibling(int pfd, const std::string& name, struct stat* st) {
  return name.rfind("fakeverbs-", 0) == 0 && fstatat(pfd, name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISDIR(st->st_mode) && st->st_uid == geteuid();
}

// "a/b/c/" -> ("a/b", "c").
void split_path(std::string dir, std::string* parent, std::string* base) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.rfind('/');
  *parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  *base = slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// Sweeps every sibling fakeverbs-* directory of `dir` and removes those
// left empty.  rmdir fails harmlessly (ENOTEMPTY) while a live process has
// entries there, and ENOENT when a concurrent sweeper was first.
void sweep_siblings(const std::string& dir, SweepTally* t) {
  std::string parent, self;
  split_path(dir, &parent, &self);
  DIR* p = opendir(parent.c_str());
  if (!p) return;
  while (dirent* e = readdir(p)) {
    const std::string name = e->d_name;
    struct stat st {};
    if (name == self || !sweepable_sibling(dirfd(p), name, &st)) continue;
    const std::string path = parent + "/" + name;
    sweep_dir(path, 0, t);
    if (unlinkat(dirfd(p), name.c_str(), AT_REMOVEDIR) == 0) count(t, path, st, true);
  }
  closedir(p);
}

void log_tally(const std::string& dir, const SweepTally& t) {
  if (t.entries == 0 && t.dirs == 0) return;
  log_error("removed %d entries (%.1f MiB) of dead processes and %d empty directories "
            "in and beside %s: %s%s",
            t.entries, double(t.bytes) / (1 << 20), t.dirs, dir.c_str(), t.examples.c_str(),
            t.entries + t.dirs > kExamples ? " ..." : "");
}

}  // namespace

bool entry_owner_gone(pid_t pid, const struct stat& st) {
  if (!pid_alive(pid)) return true;
  double start = 0;
  // Unreadable /proc (hidepid, not mounted): alive, as kill(2) says.
  if (!process_start_realtime(pid, &start)) return false;
  return seconds_of(st.st_mtim) < start - kReuseMarginSec;
}

void sweep_dir(const std::string& dir, pid_t self_too, SweepTally* tally) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    pid_t pid = entry_pid(dirfd(d), name);
    struct stat st {};
    if (pid <= 0 || fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (pid != self_too && !entry_owner_gone(pid, st)) continue;
    // ENOENT: another sweeper (or the owner's own cleanup) was first.
    if (unlinkat(dirfd(d), name.c_str(), 0) == 0) count(tally, dir + "/" + name, st, false);
  }
  closedir(d);
}

void sweep_at_start(const std::string& dir) {
  SweepTally t;
  sweep_dir(dir, 0, &t);
  sweep_siblings(dir, &t);
  log_tally(dir, t);
}

}  // namespace fakeverbs
