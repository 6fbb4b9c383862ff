// Text <-> typed value conversions for switch values. Pure functions, no state,
// thread-safe. Each parser returns a ParseResult: the value, or the reason the
// text is not acceptable (phrased as what *is* accepted, for the warning).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/config/spec.h"

namespace mlxa2a::core::config {

inline constexpr std::uint64_t kSizeInfinite = UINT64_MAX;

struct ParseResult {
  std::optional<Value> value;
  std::string accepted;  // set when !value
};

std::optional<bool> parse_bool(std::string_view text);
std::optional<std::int64_t> parse_int(std::string_view text);
// "4096", "4K", "4k", "1M", "2G", "1T", "inf". Binary multiples (K = 1024).
std::optional<std::uint64_t> parse_size(std::string_view text);
// "all" (empty list) or "mlx5_0:1,mlx5_1" (port optional, 1..255).
std::optional<std::vector<Device>> parse_devices(std::string_view text);

// Parses text as the spec's type and applies its bounds and check.
ParseResult parse_value(const Spec& spec, std::string_view text);

// Canonical text of a value: parse_value(spec, format_value(spec, v)) == v.
std::string format_value(const Spec& spec, const Value& value);
std::string format_size(std::uint64_t bytes);

std::string_view trim(std::string_view s);

}  // namespace mlxa2a::core::config
