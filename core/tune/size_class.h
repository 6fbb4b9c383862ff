// Size classes of the measured selection (docs/tune.md): class c holds bytes
// per peer in [2^c, 2^(c+1)); 0-byte calls are never tuned. The routes
// measured are core::Route's concrete ones (core/route/route.h).
#pragma once

#include <cstdint>

#include "core/route/route.h"

namespace mlxa2a::core::tune {

// The routes' names, as tune::to_string has always been spelled here.
using core::to_string;

inline constexpr unsigned kSizeClasses = 64;
unsigned size_class(std::uint64_t bytes_per_peer);  // bytes_per_peer > 0

}  // namespace mlxa2a::core::tune
