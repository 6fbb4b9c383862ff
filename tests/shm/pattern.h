// Byte patterns that identify sender, receiver, iteration and offset, so a
// block delivered to the wrong rank, from the wrong call or at the wrong
// offset is caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace mlxa2a::shm::test {

inline unsigned char pattern_byte(int from, int to, int iter, std::size_t i) {
  return static_cast<unsigned char>(from * 131 + to * 31 + iter * 7 + i * 13 + (i >> 8) * 5 + 1);
}

// Pointer forms for buffers that are not vectors (guarded, misaligned,
// mapped by the test): send holds n blocks of `bytes`, recv likewise.
inline void fill_send(unsigned char* send, int me, int n, int iter, std::size_t bytes) {
  for (int to = 0; to < n; ++to)
    for (std::size_t i = 0; i < bytes; ++i)
      send[to * bytes + i] = pattern_byte(me, to, iter, i);
}

// Returns true if recv holds what every peer sent to `me` in `iter`.
inline bool check_recv(const unsigned char* recv, int me, int n, int iter, std::size_t bytes) {
  for (int from = 0; from < n; ++from)
    for (std::size_t i = 0; i < bytes; ++i)
      if (recv[from * bytes + i] != pattern_byte(from, me, iter, i)) {
        std::fprintf(stderr, "rank %d iter %d bytes %zu: block from %d byte %zu is %u, want %u\n",
                     me, iter, bytes, from, i, recv[from * bytes + i],
                     pattern_byte(from, me, iter, i));
        return false;
      }
  return true;
}

inline void fill_send(std::vector<unsigned char>& send, int me, int n, int iter, std::size_t bytes) {
  fill_send(send.data(), me, n, iter, bytes);
}

inline bool check_recv(const std::vector<unsigned char>& recv, int me, int n, int iter,
                       std::size_t bytes) {
  return check_recv(recv.data(), me, n, iter, bytes);
}

}  // namespace mlxa2a::shm::test
