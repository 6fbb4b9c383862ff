#include "core/rcache_options.h"

#include "core/config/parse.h"

namespace mlxa2a::core {

rcache::Options rcache_options(const config::Settings& s, std::string* error) {
  rcache::Options o;
  o.alignment = static_cast<std::size_t>(s.rcache_align);
  o.max_regions = static_cast<std::size_t>(s.rcache_max_regions);
  o.max_bytes = s.rcache_max_bytes == config::kSizeInfinite
                    ? 0  // rcache: 0 = unlimited
                    : static_cast<std::size_t>(s.rcache_max_bytes);
  if (!rcache::parse_invalidation(s.rcache_invalidation, &o.invalidation)) {
    *error = "MLXA2A_RCACHE_INVALIDATION=" + s.rcache_invalidation + " is unknown to rcache";
    return rcache::Options{};
  }
  *error = rcache::validate(o);
  return error->empty() ? o : rcache::Options{};
}

}  // namespace mlxa2a::core
