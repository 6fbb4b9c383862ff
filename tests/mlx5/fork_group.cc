#include "tests/mlx5/fork_group.h"

#include <fcntl.h>

#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

namespace mlxa2a::test {

struct ForkGroup::Piece {
  std::uint32_t seq;
  std::uint32_t from;
  std::uint32_t offset;
  std::uint32_t len;
  static constexpr std::size_t kData = PIPE_BUF - 16;
  char data[kData];
};

ForkGroupWiring::ForkGroupWiring(int n) {
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (pipe(fds) != 0) {
      ok_ = false;
      return;
    }
    // A member writes all its pieces (PIPE_BUF each) before it reads: with
    // 16 members the 64 KiB default fills with one collective and the next
    // one's early pieces, and every writer blocks. 1 MiB (the default
    // pipe-max-size) holds 16 members' two collectives.
    (void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    read_.push_back(fds[0]);
    write_.push_back(fds[1]);
  }
}

ForkGroupWiring::~ForkGroupWiring() {
  for (int fd : read_) close(fd);
  for (int fd : write_) close(fd);
}

bool ForkGroup::allgather(const void* mine, void* all, std::size_t len) {
  return exchange(static_cast<const char*>(mine), 0, all, len);
}

bool ForkGroup::alltoall(const void* mine, void* theirs, std::size_t len) {
  return exchange(static_cast<const char*>(mine), len, theirs, len);
}

// Member `to` gets mine[to * stride ..) (stride 0: the same bytes for all).
bool ForkGroup::exchange(const char* mine, std::size_t stride, void* all, std::size_t len) {
  // Pipe writes up to PIPE_BUF bytes are atomic (man 7 pipe): pieces of
  // different writers never interleave.
  static_assert(sizeof(Piece) <= PIPE_BUF);
  const std::uint32_t seq = ++seq_;
  const int n = size();
  auto* out = static_cast<char*>(all);
  std::memcpy(out + static_cast<std::size_t>(rank_) * len,
              mine + static_cast<std::size_t>(rank_) * stride, len);
  Piece p;
  for (int to = 0; to < n; ++to) {
    if (to == rank_) continue;
    for (std::size_t at = 0; at == 0 || at < len; at += Piece::kData) {
      p.seq = seq;
      p.from = static_cast<std::uint32_t>(rank_);
      p.offset = static_cast<std::uint32_t>(at);
      p.len = static_cast<std::uint32_t>(len - at < Piece::kData ? len - at : Piece::kData);
      std::memcpy(p.data, mine + static_cast<std::size_t>(to) * stride + at, p.len);
      if (write(w_.write_fd(to), &p, sizeof p) != static_cast<ssize_t>(sizeof p)) return false;
      if (len == 0) break;
    }
  }
  std::size_t want = static_cast<std::size_t>(n - 1) * len;
  auto take = [&](const Piece& q) {
    std::memcpy(out + static_cast<std::size_t>(q.from) * len + q.offset, q.data, q.len);
    want -= q.len;
  };
  std::vector<std::vector<char>> later;
  for (const std::vector<char>& e : early_) {
    Piece q;
    std::memcpy(&q, e.data(), sizeof q);
    if (q.seq == seq) {
      take(q);
    } else {
      later.push_back(e);
    }
  }
  early_ = std::move(later);
  while (want > 0) {
    pollfd pfd{w_.read_fd(rank_), POLLIN, 0};
    if (::poll(&pfd, 1, 20000) <= 0) return false;
    Piece q;
    if (read(w_.read_fd(rank_), &q, sizeof q) != static_cast<ssize_t>(sizeof q)) return false;
    if (q.seq == seq) {
      take(q);
    } else {
      const char* b = reinterpret_cast<const char*>(&q);
      early_.emplace_back(b, b + sizeof q);
    }
  }
  return true;
}

}  // namespace mlxa2a::test
