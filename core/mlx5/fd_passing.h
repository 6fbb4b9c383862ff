// Passing one file descriptor from a node's leader to the node's other
// processes over a Unix socket (SCM_RIGHTS, man 7 unix). Used to hand the
// leader's verbs command fd to the ranks that import its PD (shared_pd.h).
//
// Contract
// * UniqueFd owns one descriptor and closes it once; not copyable.
// * FdServer binds a socket in the abstract namespace (no file to clean up,
//   gone with the last descriptor) under a name no other live process uses.
//   serve() accepts connections until `count` processes whose pid is in
//   `allowed` have each received the descriptor, refusing (closing) any other
//   connector: the abstract namespace is open to every process of the network
//   namespace, and a verbs command fd grants use of the device.
// * receive_fd() connects to a server's name and waits for the descriptor.
// * Every wait is bounded by timeout_ms; a failure returns false with *why set.
// * Blocking, set-up only, one thread; nothing throws.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace mlxa2a::mlx5 {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() noexcept {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset() noexcept;
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Room for an abstract socket name, NUL-padded (fixed size: it travels in an
// allgather).
struct SocketName {
  char bytes[64] = {};
};

class FdServer {
 public:
  // Listening socket with a fresh name. false + *why when the socket cannot
  // be made.
  bool open(SocketName* name, std::string* why) noexcept;
  // Sends `fd` to `count` accepted connections from processes in `allowed`.
  bool serve(int fd, int count, const std::vector<pid_t>& allowed, int timeout_ms,
             std::string* why) noexcept;

 private:
  UniqueFd listen_;
};

// Connects to `name` and receives one descriptor into *out.
bool receive_fd(const SocketName& name, int timeout_ms, UniqueFd* out, std::string* why) noexcept;

}  // namespace mlxa2a::mlx5
