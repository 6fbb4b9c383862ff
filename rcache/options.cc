#include "rcache/options.h"

#include <unistd.h>

namespace mlxa2a::rcache {

std::string validate(const Options& o) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t a = o.alignment;
  if (a < 16 || a > page || (a & (a - 1)) != 0) {
    return "rcache alignment (MLXA2A_RCACHE_ALIGN) must be a power of two from 16 to the "
           "page size (" + std::to_string(page) + "), got " + std::to_string(a);
  }
  return {};
}

bool parse_invalidation(const std::string& text, Invalidation* out) {
  if (text == "auto") *out = Invalidation::kAuto;
  else if (text == "ucm") *out = Invalidation::kUcm;
  else if (text == "patch") *out = Invalidation::kPatch;
  else if (text == "none") *out = Invalidation::kNone;
  else if (text == "strict") *out = Invalidation::kStrict;
  else return false;
  return true;
}

const char* to_string(Invalidation mode) {
  switch (mode) {
    case Invalidation::kAuto: return "auto";
    case Invalidation::kUcm: return "ucm";
    case Invalidation::kPatch: return "patch";
    case Invalidation::kNone: return "none";
    case Invalidation::kStrict: return "strict";
  }
  return "?";
}

}  // namespace mlxa2a::rcache
