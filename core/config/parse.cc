#include "core/config/parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace mlxa2a::core::config {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string join_choices(std::span<const std::string_view> choices) {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i];
  }
  return out;
}

}  // namespace

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t == "1" || t == "y" || t == "yes" || t == "true" || t == "on") return true;
  if (t == "0" || t == "n" || t == "no" || t == "false" || t == "off") return false;
  return std::nullopt;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  const std::string_view t = trim(text);
  std::int64_t v = 0;
  const char* begin = t.data();
  const char* end = t.data() + t.size();
  if (!t.empty() && *begin == '+') ++begin;
  int base = 10;  // 0x...: hex, for values written so (P_Keys)
  if (end - begin > 2 && begin[0] == '0' && (begin[1] == 'x' || begin[1] == 'X')) {
    begin += 2;
    base = 16;
  }
  const auto [ptr, ec] = std::from_chars(begin, end, v, base);
  if (t.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t == "inf" || t == "infinity" || t == "unlimited") return kSizeInfinite;
  std::uint64_t v = 0;
  const char* begin = t.data();
  const char* end = t.data() + t.size();
  const auto [ptr, ec] = std::from_chars(begin, end, v);
  if (t.empty() || ec != std::errc() || ptr == begin) return std::nullopt;
  std::string_view suffix(ptr, static_cast<std::size_t>(end - ptr));
  if (!suffix.empty() && suffix.back() == 'b') suffix.remove_suffix(1);  // "4kb"
  int shift = 0;
  if (suffix.empty()) {
    shift = 0;
  } else if (suffix == "k" || suffix == "ki") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mi") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gi") {
    shift = 30;
  } else if (suffix == "t" || suffix == "ti") {
    shift = 40;
  } else {
    return std::nullopt;
  }
  if (shift && v > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
  const std::uint64_t bytes = v << shift;
  if (bytes == kSizeInfinite) return std::nullopt;  // reserved for "inf"
  return bytes;
}

std::optional<std::vector<Device>> parse_devices(std::string_view text) {
  std::vector<Device> out;
  const std::string_view t = trim(text);
  if (t == "all") return out;
  std::string_view rest = t;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const std::size_t colon = item.find(':');
    Device d;
    d.device = std::string(item.substr(0, colon));
    if (d.device.empty() ||
        !std::all_of(d.device.begin(), d.device.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '_' || c == '-' || c == '.';
        })) {
      return std::nullopt;
    }
    if (colon != std::string_view::npos) {
      const auto port = parse_int(item.substr(colon + 1));
      if (!port || *port < 1 || *port > 255) return std::nullopt;
      d.port = static_cast<int>(*port);
    }
    if (std::find(out.begin(), out.end(), d) != out.end()) return std::nullopt;
    out.push_back(std::move(d));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

ParseResult parse_value(const Spec& spec, std::string_view text) {
  ParseResult r;
  switch (spec.type) {
    case Type::Bool:
      if (auto v = parse_bool(text)) r.value = *v;
      else r.accepted = "a boolean: 1, 0, y, n, yes, no, true, false, on or off";
      break;
    case Type::Int:
      if (auto v = parse_int(text); v && *v >= spec.min && *v <= spec.max) {
        r.value = *v;
      } else {
        r.accepted = "an integer from " + std::to_string(spec.min) + " to " +
                     std::to_string(spec.max);
      }
      break;
    case Type::Size:
      if (auto v = parse_size(text); v && *v <= spec.size_max) {
        r.value = *v;
      } else if (spec.size_max == kSizeInfinite) {
        r.accepted = "a size in bytes with an optional K, M, G or T suffix, or inf";
      } else {
        r.accepted = "a size in bytes with an optional K, M, G or T suffix, at most " +
                     format_size(spec.size_max) + " (inf is not accepted)";
      }
      break;
    case Type::Enum: {
      const std::string t = lower(trim(text));
      for (std::string_view c : spec.choices) {
        if (t == c) r.value = std::string(c);
      }
      if (!r.value) r.accepted = "one of " + join_choices(spec.choices);
      break;
    }
    case Type::String:
      r.value = std::string(trim(text));
      break;
    case Type::Devices:
      if (auto v = parse_devices(text)) r.value = std::move(*v);
      else r.accepted = "all, or a comma-separated list of distinct DEVICE[:PORT] such as mlx5_0:1,mlx5_1:1";
      break;
    case Type::Tune: {
      std::string error;
      if (auto v = rules::Table::parse(text, &error)) r.value = std::move(*v);
      else r.accepted = "RANGE:PATH rules separated by '#' (e.g. 0-4K:shm#4K-inf:pmpi); " + error;
      break;
    }
  }
  if (r.value && spec.check) {
    r.accepted = spec.check(*r.value);
    if (!r.accepted.empty()) r.value.reset();
  }
  return r;
}

std::string format_size(std::uint64_t bytes) {
  if (bytes == kSizeInfinite) return "inf";
  static constexpr std::pair<int, char> kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (const auto& [shift, unit] : kUnits) {
    const std::uint64_t one = std::uint64_t{1} << shift;
    if (bytes >= one && bytes % one == 0) return std::to_string(bytes >> shift) + unit;
  }
  return std::to_string(bytes);
}

std::string format_value(const Spec& spec, const Value& value) {
  switch (spec.type) {
    case Type::Bool:
      return std::get<bool>(value) ? "y" : "n";
    case Type::Int:
      return std::to_string(std::get<std::int64_t>(value));
    case Type::Size:
      return format_size(std::get<std::uint64_t>(value));
    case Type::Enum:
    case Type::String:
      return std::get<std::string>(value);
    case Type::Devices: {
      const auto& devs = std::get<std::vector<Device>>(value);
      if (devs.empty()) return "all";
      std::string out;
      for (const Device& d : devs) {
        if (!out.empty()) out += ',';
        out += d.device;
        if (d.port) {
          out += ':';
          out += std::to_string(d.port);
        }
      }
      return out;
    }
    case Type::Tune:
      return std::get<rules::Table>(value).format();
  }
  return {};
}

std::string_view to_string(Type t) {
  static constexpr std::string_view k[] = {"bool", "int", "size", "enum", "string", "devices", "tune"};
  return k[static_cast<int>(t)];
}
std::string_view to_string(Verbosity v) {
  static constexpr std::string_view k[] = {"user", "tuner", "developer"};
  return k[static_cast<int>(v)];
}
std::string_view to_string(Scope s) {
  static constexpr std::string_view k[] = {"local", "all-equal"};
  return k[static_cast<int>(s)];
}
std::string_view to_string(Source s) {
  static constexpr std::string_view k[] = {"default", "file", "env"};
  return k[static_cast<int>(s)];
}

}  // namespace mlxa2a::core::config
