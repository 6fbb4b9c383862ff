// Reading and replacing one small regular file without following symbolic
// links, blocking on devices or reading without bound: the tune file is named
// by the user and may be read and written by a root job in a directory
// others can write to (docs/tune.md, "The tune file on disk").
//
// MPI-free; thread-safe as far as the file system is (the umask is read from
// /proc/self/status, never set).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace mlxa2a::core::tune {

// What is at a path: nothing, or the regular file with this identity.
struct FileIdentity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// Reads the regular file at path into *text, its identity into *found;
// nothing there reads as "" with found->exists == false. Refused, *error =
// "path: reason": a symbolic link at path itself (links above it are
// followed), anything but a regular file (never opened for reading: lstat,
// then open O_NOFOLLOW|O_NONBLOCK and fstat must agree), a file over
// max_bytes, read errors.
bool read_regular_file(const std::string& path, std::size_t max_bytes, std::string* text,
                       FileIdentity* found, std::string* error);

// Replaces what is at path with text, atomically for readers: a new mkstemp
// temporary beside path (random name, O_EXCL: a planted symbolic link is
// never followed), mode 0666 & ~umask, fsync'ed, renamed over path only if
// what is there is still `expected` (same device and inode, or nothing).
// On failure the temporary is removed, path untouched, *error says why.
bool replace_regular_file(const std::string& path, std::string_view text,
                          const FileIdentity& expected, std::string* error);

}  // namespace mlxa2a::core::tune
