#include "core/tune/candidate.h"

#include <bit>
#include <iterator>

namespace mlxa2a::core::tuning {

namespace {
constexpr std::string_view kNames[kCandidateKinds] = {"pmpi", "line", "copy", "cma", "hier",
                                                           "rdma", "zcopy"};
}

std::string_view to_string(Candidate c) { return kNames[static_cast<std::size_t>(c)]; }

std::optional<Candidate> candidate_from_string(std::string_view s) {
  for (std::size_t i = 0; i < std::size(kNames); ++i) {
    if (s == kNames[i]) return static_cast<Candidate>(i);
  }
  return std::nullopt;
}

unsigned size_class(std::uint64_t bytes) { return static_cast<unsigned>(std::bit_width(bytes)) - 1; }

}  // namespace mlxa2a::core::tuning
