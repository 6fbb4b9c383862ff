// mlxa2a::rcache — a fixed-capacity array in reserved, lazily committed virtual memory.
//
// Why: the hit path must not chase chunk pointers, and random lookups over 100k
// regions are dominated by cache and TLB misses. One reservation per array gives O(1)
// indexing with no indirection and never moves (lock-free readers stay valid), and
// MADV_HUGEPAGE lets the kernel back large arrays with 2 MiB pages (measured: without
// it, misses that grow the cache to 1M regions cost ~5x more, page faults). Untouched
// pages cost nothing and read as zero.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace mlxa2a::rcache::detail {

template <class T>
class VirtualArray {
 public:
  explicit VirtualArray(size_t capacity) : bytes_(capacity * sizeof(T)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (bytes_ >= (size_t{2} << 20)) (void)madvise(p, bytes_, MADV_HUGEPAGE);
    data_ = static_cast<T*>(p);
  }
  ~VirtualArray() { munmap(data_, bytes_); }
  VirtualArray(const VirtualArray&) = delete;
  VirtualArray& operator=(const VirtualArray&) = delete;

  // Elements are zero bytes until written; T must be valid as all-zero (atomics of
  // integers and pointers are).
  T& operator[](size_t i) const { return data_[i]; }
  T* data() const { return data_; }

 private:
  size_t bytes_;
  T* data_;
};

}  // namespace mlxa2a::rcache::detail
