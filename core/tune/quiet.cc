#include "core/tune/quiet.h"

#include <algorithm>

namespace mlxa2a::core::tune {

void QuietPmpi::enter(std::uint64_t call) noexcept {
  on_ = true;
  pending_ = false;
  interval_ = kFirstInterval;
  next_ = call + interval_;
}

void QuietPmpi::agreed(bool any_pending, std::uint64_t call) noexcept {
  ++agreements_;
  pending_ = false;
  if (any_pending) {
    on_ = false;
    return;
  }
  interval_ = std::min(interval_ * 2, kMaxInterval);
  next_ = call + interval_;
}

}  // namespace mlxa2a::core::tune
