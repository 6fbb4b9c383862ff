// mlxa2a::rcache — cache options (filled by core from the switch table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mlxa2a::rcache {

// How the cache learns that cached memory was unmapped or remapped. See docs/rcache.md.
enum class Invalidation {
  kAuto,   // libucm's event API if libucm is already loaded, else our own libc patches
  kUcm,    // libucm's event API (dlopen libucm.so.0 if needed); error if unavailable
  kPatch,  // patch libc's entry points ourselves (x86_64 glibc only)
  kNone,   // no invalidation: only for programs that never unmap registered memory
  kStrict, // kAuto's hooks plus userfaultfd events for every cached range (also sees raw
           // system calls; each unmap of a cached range costs a round trip to a thread)
};

struct Options {
  // Registered range = request rounded out to this. Power of two in [16, page size]:
  // within that bound the rounding never leaves the pages that hold the user's bytes,
  // so it can never reach another mapping.
  size_t alignment = 16;
  size_t max_regions = 65536;            // 0 = unlimited
  size_t max_bytes = size_t{1} << 36;    // 0 = unlimited (64 GiB default)
  // Cap max_bytes at half of RLIMIT_MEMLOCK (when not unlimited): registrations pin
  // memory and the engine needs the rest for its own buffers.
  bool honour_memlock = true;
  Invalidation invalidation = Invalidation::kAuto;
};

// Empty string when valid, else a message naming the offending field and its range.
[[nodiscard]] std::string validate(const Options& options);

// Parses "auto|ucm|patch|none|strict" (for core's switch table); false if unknown.
[[nodiscard]] bool parse_invalidation(const std::string& text, Invalidation* out);
[[nodiscard]] const char* to_string(Invalidation mode);

}  // namespace mlxa2a::rcache
