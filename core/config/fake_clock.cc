#include "core/config/fake_clock.h"

#include "core/config/parse.h"

namespace mlxa2a::core::config {

namespace {

std::optional<double> parse_us(std::string_view s) {
  const auto v = parse_int(s);
  if (!v || *v < 0 || *v > 1000000000) return std::nullopt;
  return static_cast<double>(*v);
}

}  // namespace

std::optional<FakeClock> FakeClock::parse(std::string_view text) {
  FakeClock clock;
  text = trim(text);
  while (!text.empty()) {
    const std::size_t semi = text.find(';');
    std::string_view g = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    Group group;
    group.us.fill(-1);
    if (const std::size_t colon = g.find(':'); colon != std::string_view::npos) {
      const auto rank = parse_int(trim(g.substr(0, colon)));
      if (!rank || *rank < 0 || *rank > INT32_MAX) return std::nullopt;
      group.rank = static_cast<int>(*rank);
      g = g.substr(colon + 1);
    }
    if (trim(g).empty()) return std::nullopt;
    while (!g.empty()) {
      const std::size_t comma = g.find(',');
      const std::string_view item = trim(g.substr(0, comma));
      g = comma == std::string_view::npos ? std::string_view() : g.substr(comma + 1);
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos) return std::nullopt;
      const auto path = concrete_route_from_string(trim(item.substr(0, eq)));
      const auto us = parse_us(trim(item.substr(eq + 1)));
      if (!path || !us) return std::nullopt;
      group.us[static_cast<std::size_t>(*path)] = *us;
    }
    clock.groups_.push_back(group);
  }
  return clock;
}

std::optional<double> FakeClock::seconds(int rank, Route path) const {
  double every = -1, own = -1;  // later groups win; a rank's own over "every rank"
  for (const Group& g : groups_) {
    const double v = g.us[static_cast<std::size_t>(path)];
    if (v < 0) continue;
    if (g.rank == rank) own = v;
    if (g.rank < 0) every = v;
  }
  const double us = own >= 0 ? own : every;
  if (us < 0) return std::nullopt;
  return us * 1e-6;
}

}  // namespace mlxa2a::core::config
