#include "tests/mlx5/socket_relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace mlxa2a::test {

namespace {

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

SocketRelayWiring::SocketRelayWiring(int n) : n_(n), fds_(static_cast<std::size_t>(n * n), -1) {
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        ok_ = false;
        continue;
      }
      fds_[static_cast<std::size_t>(a * n + b)] = sv[0];
      fds_[static_cast<std::size_t>(b * n + a)] = sv[1];
    }
  }
}

SocketRelayWiring::~SocketRelayWiring() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

Status SocketRelay::send(int member, const hier::RelayNotice& notice, const char* data) noexcept {
  const int fd = w_.fd(me_, member);
  if (!write_all(fd, reinterpret_cast<const char*>(&notice), sizeof notice) ||
      (notice.bytes != 0 && !write_all(fd, data, notice.bytes))) {
    return Status::net_failed;
  }
  ++sent_;
  return Status::ok;
}

Status SocketRelay::next(int* member, hier::RelayNotice* notice, bool* got) noexcept {
  *got = false;
  for (int m = 0; m < w_.size(); ++m) {
    if (m == me_) continue;
    pollfd p{w_.fd(me_, m), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1 || (p.revents & POLLIN) == 0) continue;
    if (!read_all(p.fd, reinterpret_cast<char*>(notice), sizeof *notice) ||
        notice->magic != hier::RelayNotice::kMagic) {
      return Status::net_failed;
    }
    *member = m;
    *got = true;
    return Status::ok;
  }
  return Status::ok;
}

Status SocketRelay::receive(int member, char* dst, std::size_t bytes) noexcept {
  const int fd = w_.fd(me_, member);
  std::vector<char> sink;
  if (!dst) {
    sink.resize(bytes);
    dst = sink.data();
  }
  return read_all(fd, dst, bytes) ? Status::ok : Status::net_failed;
}

}  // namespace mlxa2a::test
