#include "core/tune/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

namespace mlxa2a::core::tune {

namespace {

std::string failed(const std::string& path, const std::string& why) { return path + ": " + why; }
std::string failed_errno(const std::string& path, const char* what) {
  return failed(path, std::string(what) + ": " + std::strerror(errno));
}

const char* kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link (name the file itself)";
  if (S_ISCHR(mode)) return "a character device, not a regular file";
  if (S_ISBLK(mode)) return "a block device, not a regular file";
  if (S_ISFIFO(mode)) return "a FIFO, not a regular file";
  if (S_ISSOCK(mode)) return "a socket, not a regular file";
  if (S_ISDIR(mode)) return "a directory, not a regular file";
  return "not a regular file";
}

// What is at path, without following a link there. Returns false with
// *error for anything but nothing or a regular file.
bool identify(const std::string& path, FileIdentity* found, std::string* error) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      *error = failed_errno(path, "cannot stat");
      return false;
    }
    *found = FileIdentity{};
    return true;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = failed(path, std::string("is ") + kind_of(st.st_mode));
    return false;
  }
  *found = FileIdentity{true, st.st_dev, st.st_ino};
  return true;
}

// An open descriptor, closed once.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // close(2)'s result: on NFS a deferred write error shows up here.
  bool close() { return ::close(std::exchange(fd_, -1)) == 0; }

 private:
  int fd_;
};

// The process's umask, read without changing it (umask(2) can only be read
// by setting it, which races with other threads creating files). Without
// /proc the temporary keeps mkstemp's 0600.
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) {
      return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8) & 0777);
    }
  }
  return 0077;
}

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A new file from mkstemp, removed unless renamed into place.
class Temporary {
 public:
  explicit Temporary(const std::string& beside)
      : name_(beside + ".tmp.XXXXXX"), fd_(::mkostemp(name_.data(), O_CLOEXEC)) {}
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() {
    if (created_ && !renamed_) ::unlink(name_.c_str());
  }
  bool created() const { return created_; }
  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  bool close() { return fd_.close(); }
  bool rename_to(const std::string& path) {
    renamed_ = std::rename(name_.c_str(), path.c_str()) == 0;
    return renamed_;
  }

 private:
  std::string name_;
  Descriptor fd_;
  bool created_ = fd_.get() >= 0;
  bool renamed_ = false;
};

}  // namespace

bool read_regular_file(const std::string& path, std::size_t max_bytes, std::string* text,
                       FileIdentity* found, std::string* error) {
  text->clear();
  if (!identify(path, found, error)) return false;
  if (!found->exists) return true;
  // O_NONBLOCK: should a FIFO or device replace the file after lstat, open
  // does not wait for a writer or a carrier; fstat then refuses it.
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    *error = errno == ELOOP ? failed(path, std::string("is ") + kind_of(S_IFLNK))
                            : failed_errno(path, "cannot open");
    return false;
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    *error = failed_errno(path, "cannot stat");
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = failed(path, std::string("is ") + kind_of(st.st_mode));
    return false;
  }
  if (st.st_dev != found->device || st.st_ino != found->inode) {
    *error = failed(path, "was replaced while being opened");
    return false;
  }
  const std::string too_large =
      "is larger than " + std::to_string(max_bytes) + " bytes, the limit for this file";
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    *error = failed(path, too_large);
    return false;
  }
  // Read one byte past the limit: a file that grew since fstat is refused too.
  text->resize(max_bytes + 1);
  std::size_t got = 0;
  while (got < text->size()) {
    const ssize_t n = ::read(fd.get(), text->data() + got, text->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = failed_errno(path, "cannot read");
      return false;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes) {
    *error = failed(path, too_large);
    return false;
  }
  text->resize(got);
  return true;
}

bool replace_regular_file(const std::string& path, std::string_view text,
                          const FileIdentity& expected, std::string* error) {
  Temporary tmp(path);
  if (!tmp.created()) {
    *error = failed_errno(tmp.name(), "cannot create");
    return false;
  }
  if (::fchmod(tmp.fd(), 0666 & ~current_umask()) != 0 || !write_all(tmp.fd(), text) ||
      ::fsync(tmp.fd()) != 0 || !tmp.close()) {
    *error = failed_errno(tmp.name(), "cannot write");
    return false;
  }
  // The last look before the rename narrows (cannot close: rename(2) has no
  // compare-and-swap) the window in which another process may put something
  // else at path.
  FileIdentity now;
  if (!identify(path, &now, error)) return false;
  if (now != expected) {
    *error = failed(path, expected.exists ? "was replaced or removed since it was read"
                                          : "was created since it was found absent");
    return false;
  }
  if (!tmp.rename_to(path)) {
    *error = failed_errno(path, "cannot rename the temporary over it");
    return false;
  }
  return true;
}

}  // namespace mlxa2a::core::tune
