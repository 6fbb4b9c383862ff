#include "core/mlx5/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace mlxa2a::mlx5 {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// sockaddr for an abstract name: sun_path[0] is NUL, the rest is the name
// (man 7 unix, "abstract"); the length counts only the name's bytes.
socklen_t abstract_address(const SocketName& name, sockaddr_un* sa) {
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  const std::size_t len = strnlen(name.bytes, sizeof name.bytes);
  std::memcpy(sa->sun_path + 1, name.bytes, len);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
}

// Milliseconds left until `end`, at least 0.
int left_ms(Clock::time_point end) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
  return static_cast<int>(std::max<long long>(ms, 0));
}

// Waits until `fd` is readable; false on timeout or error (*why set).
bool wait_readable(int fd, Clock::time_point end, const char* what, std::string* why) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int rc = poll(&p, 1, left_ms(end));
    if (rc > 0) return true;
    if (rc == 0) {
      *why = std::string(what) + ": timed out";
      return false;
    }
    if (errno != EINTR) {
      *why = errno_text(what);
      return false;
    }
  }
}

// One byte of payload plus room for one descriptor (SCM_RIGHTS), the
// message both ends of the hand-over use. Not copyable: msg points into it.
struct FdMessage {
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};

  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

bool send_fd(int sock, int fd, std::string* why) {
  FdMessage m;
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t rc;
  do rc = sendmsg(sock, &m.msg, MSG_NOSIGNAL);
  while (rc < 0 && errno == EINTR);
  if (rc != 1) {
    *why = errno_text("sendmsg(SCM_RIGHTS)");
    return false;
  }
  return true;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void UniqueFd::reset() noexcept {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool FdServer::open(SocketName* name, std::string* why) noexcept {
  // pid + a per-process counter + the clock: unique among live processes (a
  // collision is refused by bind with EADDRINUSE, reported, never shared).
  static std::atomic<unsigned> counter{0};
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *name = SocketName{};
  std::snprintf(name->bytes, sizeof name->bytes, "mlxa2a-pd-%d-%u-%ld", int(getpid()),
                counter.fetch_add(1), long(ts.tv_nsec));
  listen_ = UniqueFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listen_) {
    *why = errno_text("socket(AF_UNIX)");
    return false;
  }
  sockaddr_un sa;
  const socklen_t len = abstract_address(*name, &sa);
  if (bind(listen_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
      listen(listen_.get(), SOMAXCONN) != 0) {
    *why = errno_text("bind/listen on an abstract Unix socket");
    listen_.reset();
    return false;
  }
  return true;
}

bool FdServer::serve(int fd, int count, const std::vector<pid_t>& allowed, int timeout_ms,
                     std::string* why) noexcept {
  if (!listen_) {
    *why = "no listening socket";
    return false;
  }
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<pid_t> served;
  while (static_cast<int>(served.size()) < count) {
    if (!wait_readable(listen_.get(), end, "waiting for the node's ranks to connect", why)) {
      *why += " (" + std::to_string(served.size()) + " of " + std::to_string(count) + " served)";
      return false;
    }
    UniqueFd conn(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      *why = errno_text("accept");
      return false;
    }
    ucred cred{};
    socklen_t clen = sizeof cred;
    if (getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) continue;
    const bool member = std::find(allowed.begin(), allowed.end(), cred.pid) != allowed.end();
    const bool again = std::find(served.begin(), served.end(), cred.pid) != served.end();
    if (!member || again) continue;  // a stranger (or a repeat): refused by closing
    if (!send_fd(conn.get(), fd, why)) return false;
    served.push_back(cred.pid);
  }
  listen_.reset();  // the name disappears with the socket
  return true;
}

bool receive_fd(const SocketName& name, int timeout_ms, UniqueFd* out, std::string* why) noexcept {
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock) {
    *why = errno_text("socket(AF_UNIX)");
    return false;
  }
  sockaddr_un sa;
  const socklen_t len = abstract_address(name, &sa);
  // The server listens before it publishes its name, so a refusal means it
  // is not reachable from here (another network namespace, or gone).
  if (connect(sock.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    *why = errno_text("connect to the leader's socket");
    return false;
  }
  if (!wait_readable(sock.get(), end, "waiting for the leader's command fd", why)) return false;
  FdMessage m;
  ssize_t rc;
  do rc = recvmsg(sock.get(), &m.msg, MSG_CMSG_CLOEXEC);
  while (rc < 0 && errno == EINTR);
  cmsghdr* c = rc == 1 ? CMSG_FIRSTHDR(&m.msg) : nullptr;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int)) || (m.msg.msg_flags & MSG_CTRUNC)) {
    *why = rc < 0 ? errno_text("recvmsg") : "the leader closed the socket without a descriptor";
    return false;
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  *out = UniqueFd(fd);
  return true;
}

}  // namespace mlxa2a::mlx5
