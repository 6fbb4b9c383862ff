// Reading and replacing one small regular file without following symbolic
// links, blocking on devices or reading without bound: the tune file
// (MLXA2A_TUNE_FILE, docs/tune.md) is named by the user and may be read and
// written by a root job in a directory others can write to.
//
// MPI-free; the functions are thread-safe as far as the file system is
// (replace_regular_file() reads the process's umask from /proc/self/status,
// never by setting it).
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

// Reads the regular file at path into *text and its identity into *found.
// Nothing at the path reads as empty text with found->exists == false.
// Refused, with *error = "path: reason": a symbolic link at the path itself
// (O_NOFOLLOW; links among the directories above are followed), anything
// that is not a regular file (devices and FIFOs are never opened for
// reading: lstat first, then open O_NOFOLLOW|O_NONBLOCK and fstat must agree),
// a file larger than max_bytes, and read errors.
bool read_regular_file(const std::string& path, std::size_t max_bytes, std::string* text,
                       FileIdentity* found, std::string* error);

// Replaces what is at path with text, atomically for readers: the text goes
// to a new temporary beside path (mkstemp: a fresh random name, O_EXCL, so a
// symbolic link planted anywhere is never followed), mode 0666 & ~umask,
// fsync'ed, then renamed over path - but only if what is at path is still
// `expected` just before the rename (same device and inode, or still
// nothing). On failure the temporary is removed, path is untouched and
// *error says why.
bool replace_regular_file(const std::string& path, std::string_view text,
                          const FileIdentity& expected, std::string* error);

}  // namespace mlxa2a::core::tune
