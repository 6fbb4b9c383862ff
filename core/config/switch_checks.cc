#include "core/config/switch_checks.h"

#include <unistd.h>

#include <variant>

#include "core/config/fake_clock.h"
#include "core/config/leaders.h"
#include "core/config/node_layout.h"
#include "core/config/parse.h"

namespace mlxa2a::core::config::checks {

std::string check_align(const Value& v) {
  const std::uint64_t a = std::get<std::uint64_t>(v);
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  if (a >= 16 && a <= page && (a & (a - 1)) == 0) return {};
  return "a power of two from 16 to the page size (" + std::to_string(page) + ")";
}

std::string check_nonzero_size(const Value& v) {
  return std::get<std::uint64_t>(v) > 0 ? std::string() : std::string("a size above 0, or inf");
}

std::string check_coll_stats(const Value& v) {
  const std::string& s = std::get<std::string>(v);
  if (parse_bool(s) || s == "json" || (s.rfind("json:", 0) == 0 && s.size() > 5)) return "";
  return "a boolean (y/n), json, or json:PATH";
}

std::string check_nonempty(const Value& v) {
  return std::get<std::string>(v).empty() ? std::string("a library name or path") : std::string();
}

std::string check_slot_size(const Value& v) {
  return std::get<std::uint64_t>(v) > 0 ? std::string() : std::string("a size above 0, at most 1G");
}

std::string check_piece(const Value& v) {
  return std::get<std::uint64_t>(v) >= 64 ? std::string() : std::string("a size from 64 to 1G");
}

std::string check_leaders(const Value& v) {
  return LeaderPolicy::parse(std::get<std::string>(v)) ? std::string()
                                                       : std::string(kLeaderPolicySyntax);
}

std::string check_fake_clock(const Value& v) {
  return FakeClock::parse(std::get<std::string>(v)) ? std::string()
                                                            : std::string(kFakeClockSyntax);
}

std::string check_node_layout(const Value& v) {
  return NodeLayout::parse(std::get<std::string>(v)) ? std::string()
                                                     : std::string(kNodeLayoutSyntax);
}

}  // namespace mlxa2a::core::config::checks
