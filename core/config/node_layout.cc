#include "core/config/node_layout.h"

#include <charconv>

namespace mlxa2a::core::config {

namespace {

constexpr int kMaxNumber = 1000000;
constexpr std::size_t kMaxEntries = 64;

std::optional<int> number(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > kMaxNumber) {
    return std::nullopt;
  }
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<NodeLayout> NodeLayout::parse(std::string_view text) {
  text = trim(text);
  NodeLayout l;
  if (text.substr(0, 3) == "rr:") {
    const auto n = number(text.substr(3));
    if (!n || *n == 0) return std::nullopt;
    l.kind = Kind::RoundRobin;
    l.per_node = *n;
    return l;
  }
  if (text.find(',') == std::string_view::npos) {
    const auto n = number(text);
    if (!n) return std::nullopt;
    if (*n > 0) {
      l.kind = Kind::Block;
      l.per_node = *n;
    }
    return l;
  }
  l.kind = Kind::Irregular;
  while (true) {
    const std::size_t comma = text.find(',');
    const auto n = number(trim(text.substr(0, comma)));
    if (!n || *n == 0 || l.sizes.size() == kMaxEntries) return std::nullopt;
    l.sizes.push_back(*n);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return l;
}

int NodeLayout::node_of(int rank, int size) const {
  switch (kind) {
    case Kind::Real:
      return 0;
    case Kind::Block:
      return rank / per_node;
    case Kind::RoundRobin: {
      const int nodes = (size + per_node - 1) / per_node;
      return nodes > 0 ? rank % nodes : 0;
    }
    case Kind::Irregular: {
      long period = 0;
      for (int s : sizes) period += s;
      const long cycle = rank / period;
      long offset = rank % period;
      int node = static_cast<int>(cycle * static_cast<long>(sizes.size()));
      for (int s : sizes) {
        if (offset < s) break;
        offset -= s;
        ++node;
      }
      return node;
    }
  }
  return 0;
}

std::string NodeLayout::format() const {
  switch (kind) {
    case Kind::Real:
      return "0";
    case Kind::Block:
      return std::to_string(per_node);
    case Kind::RoundRobin:
      return "rr:" + std::to_string(per_node);
    case Kind::Irregular: {
      std::string s;
      for (int v : sizes) s += (s.empty() ? "" : ",") + std::to_string(v);
      return s;
    }
  }
  return "0";
}

}  // namespace mlxa2a::core::config
