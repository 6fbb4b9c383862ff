#include "core/rcache_options.h"

#include "core/config/parse.h"

namespace mlxa2a::core {

rcache::Options rcache_options(const config::RcacheSwitches& s, std::string* error) {
  rcache::Options o;
  o.alignment = static_cast<std::size_t>(s.align);
  o.max_regions = static_cast<std::size_t>(s.max_regions);
  o.max_bytes = s.max_bytes == config::kSizeInfinite
                    ? 0  // rcache: 0 = unlimited
                    : static_cast<std::size_t>(s.max_bytes);
  if (!rcache::parse_invalidation(s.invalidation, &o.invalidation)) {
    *error = "MLXA2A_RCACHE_INVALIDATION=" + s.invalidation + " is unknown to rcache";
    return rcache::Options{};
  }
  *error = rcache::validate(o);
  return error->empty() ? o : rcache::Options{};
}

}  // namespace mlxa2a::core
