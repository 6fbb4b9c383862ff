// A counting fake Registrar for rcache tests: records every registration, can refuse
// on demand, and remembers a marker read from the first registered word so a test can
// tell a fresh registration from a stale one after munmap + mmap at the same address.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>

#include "rcache/registrar.h"

namespace mlxa2a::rcache::test {

class FakeRegistrar final : public Registrar {
 public:
  struct Entry {
    uintptr_t addr;
    size_t len;
    unsigned access;
    uint64_t marker;
  };

  bool register_memory(void* addr, size_t len, unsigned access, MemoryKey* out) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    ++attempts_;
    if (fail_next_ > 0) {
      --fail_next_;
      return false;
    }
    if (fail_if_longer_ != 0 && len > fail_if_longer_) return false;
    const uint32_t id = next_++;
    uint64_t marker = 0;
    if (read_marker_) std::memcpy(&marker, addr, sizeof marker);
    live_[id] = {reinterpret_cast<uintptr_t>(addr), len, access, marker};
    ++registrations_;
    out->lkey = id;
    out->rkey = id | 0x80000000u;
    out->iova = reinterpret_cast<uintptr_t>(addr) + iova_offset_;
    out->handle = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
    return true;
  }

  void deregister_memory(const MemoryKey& key) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(key.handle));
    if (live_.erase(id) != 1) ADD_FAILURE() << "deregister of unknown key " << id;
    ++deregistrations_;
  }

  size_t live() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }
  bool is_live(uint32_t lkey) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(lkey) != 0;
  }
  Entry entry(uint32_t lkey) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(lkey);
    return it == live_.end() ? Entry{0, 0, 0, 0} : it->second;
  }
  size_t registrations() {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  size_t deregistrations() {
    std::lock_guard<std::mutex> lock(mu_);
    return deregistrations_;
  }
  // NIC addresses that differ from virtual ones (e.g. zero-based MRs): iova = addr + off.
  void iova_offset(uint64_t off) {
    std::lock_guard<std::mutex> lock(mu_);
    iova_offset_ = off;
  }
  void fail_next(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = n;
  }
  void fail_if_longer(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_if_longer_ = n;
  }
  void read_marker(bool on) { read_marker_ = on; }

 private:
  std::mutex mu_;
  std::map<uint32_t, Entry> live_;
  uint32_t next_ = 1;
  size_t attempts_ = 0, registrations_ = 0, deregistrations_ = 0;
  int fail_next_ = 0;
  size_t fail_if_longer_ = 0;
  uint64_t iova_offset_ = 0;
  bool read_marker_ = false;
};

}  // namespace mlxa2a::rcache::test
