// hier::Relay between forked processes over socketpairs (tests only): the
// second path an MPI-free test gives a one-sided transport, as the engine
// gives it PMPI (core/mpi/pmpi_relay.h).
//
// The parent creates a SocketRelayWiring for n members before forking (a
// socketpair per pair of members; the fds stay open across fork); each child
// then makes a SocketRelay for its member number. send() writes the notice
// and its bytes whole (blocking: a test's messages fit the socket buffers);
// next() looks at every partner's socket without blocking and reads a
// notice whole once one has begun; receive() reads the bytes that follow.
#pragma once

#include <cstddef>
#include <vector>

#include "core/hier/relay.h"

namespace mlxa2a::test {

class SocketRelayWiring {
 public:
  explicit SocketRelayWiring(int n);
  ~SocketRelayWiring();
  SocketRelayWiring(const SocketRelayWiring&) = delete;
  SocketRelayWiring& operator=(const SocketRelayWiring&) = delete;
  bool ok() const { return ok_; }
  int size() const { return n_; }
  // Member `me`'s end of its socket to `other`.
  int fd(int me, int other) const { return fds_[static_cast<std::size_t>(me * n_ + other)]; }

 private:
  int n_;
  std::vector<int> fds_;
  bool ok_ = true;
};

class SocketRelay final : public hier::Relay {
 public:
  SocketRelay(const SocketRelayWiring& wiring, int me) : w_(wiring), me_(me) {}
  Status send(int member, const hier::RelayNotice& notice, const char* data) noexcept override;
  Status next(int* member, hier::RelayNotice* notice, bool* got) noexcept override;
  Status receive(int member, char* dst, std::size_t bytes) noexcept override;
  std::size_t sent() const { return sent_; }

 private:
  const SocketRelayWiring& w_;
  int me_;
  std::size_t sent_ = 0;
};

}  // namespace mlxa2a::test
