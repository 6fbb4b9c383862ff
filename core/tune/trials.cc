#include "core/tune/trials.h"

#include <algorithm>

namespace mlxa2a::core::tuning {

Trials::Trials(std::span<const Route> candidates, unsigned samples)
    : candidates_(candidates.begin(), candidates.end()),
      samples_(samples),
      times_(candidates.size() * samples, 0.0) {}

void Trials::record(double seconds) {
  if (complete()) return;
  const std::size_t n = candidates_.size();
  times_[(calls_ % n) * samples_ + calls_ / n] = seconds;
  ++calls_;
}

std::vector<double> Trials::medians() const {
  std::vector<double> out;
  out.reserve(candidates_.size());
  for (std::size_t c = 0; c < candidates_.size(); ++c) {
    const auto first = times_.begin() + static_cast<std::ptrdiff_t>(c * samples_);
    out.push_back(median(std::vector<double>(first, first + samples_)));
  }
  return out;
}

unsigned samples_for(unsigned size_class, unsigned samples) {
  constexpr unsigned kCheapBelowClass = 13;  // 8 KiB per peer
  constexpr unsigned kCheapFactor = 4;
  constexpr unsigned kMaxSamples = 64;
  if (size_class >= kCheapBelowClass) return samples;
  return std::min(kMaxSamples, std::max(samples, kCheapFactor * samples));
}

double median(std::vector<double> v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

std::size_t choose(std::span<const Route> candidates, std::span<const double> medians,
                   double margin) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < medians.size(); ++i) {
    if (medians[i] < medians[best]) best = i;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i] == Route::pmpi && i != best &&
        !(medians[best] <= (1.0 - margin) * medians[i])) {
      return i;
    }
  }
  return best;
}

}  // namespace mlxa2a::core::tuning
