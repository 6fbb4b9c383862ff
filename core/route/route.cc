#include "core/route/route.h"

#include <iterator>

namespace mlxa2a::core {

namespace {
constexpr std::string_view kNames[kRouteKinds] = {"pmpi", "line", "copy", "cma", "hier",
                                                  "rdma", "zcopy", "shm", "auto"};
}

std::string_view to_string(Route r) { return kNames[static_cast<std::size_t>(r)]; }

std::optional<Route> route_from_string(std::string_view s) {
  for (std::size_t i = 0; i < std::size(kNames); ++i) {
    if (s == kNames[i]) return static_cast<Route>(i);
  }
  return std::nullopt;
}

std::optional<Route> concrete_route_from_string(std::string_view s) {
  const auto r = route_from_string(s);
  if (r && is_concrete(*r)) return r;
  return std::nullopt;
}

}  // namespace mlxa2a::core
