#include "core/tune/size_class.h"

#include <bit>

namespace mlxa2a::core::tune {

unsigned size_class(std::uint64_t bytes) { return static_cast<unsigned>(std::bit_width(bytes)) - 1; }

}  // namespace mlxa2a::core::tune
