// The MLXA2A_RCACHE_* switches as one plain struct, filled once from the
// switch table (each RCACHE_ row of core/config/switches.cc names its field
// here) and carried whole by Settings. rcache/ knows nothing of core: core
// converts and validates it in one place (core/rcache_options.h).
//
// Plain data with no project includes.
#pragma once

#include <cstdint>
#include <string>

namespace mlxa2a::core::config {

// Defaults equal the rows' default texts (a unit test compares them).
struct RcacheSwitches {
  std::uint64_t align = 16;          // MLXA2A_RCACHE_ALIGN
  std::int64_t max_regions = 65536;  // MLXA2A_RCACHE_MAX_REGIONS
  // MLXA2A_RCACHE_MAX_BYTES; inf is UINT64_MAX (config::kSizeInfinite).
  std::uint64_t max_bytes = std::uint64_t{64} << 30;
  std::string invalidation = "auto";  // MLXA2A_RCACHE_INVALIDATION
  friend bool operator==(const RcacheSwitches&, const RcacheSwitches&) = default;
};

}  // namespace mlxa2a::core::config
