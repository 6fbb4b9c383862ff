#include "core/tune/trials.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mlxa2a::core::tune {

namespace {

// SplitMix64's output function: a fixed, well-mixed hash of its input.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t draw(std::uint64_t seed, std::uint64_t i) { return mix(seed ^ mix(i)); }

namespace {
constexpr unsigned kCheapBelowClass = 13;  // 8 KiB per peer
}  // namespace

Unkept unkept_for(unsigned size_class) {
  return size_class >= kCheapBelowClass ? Unkept::lead_ins : Unkept::warm_up;
}

unsigned samples_for(unsigned size_class, unsigned samples) {
  constexpr unsigned kCheapFactor = 4;
  constexpr unsigned kMaxSamples = 64;
  if (size_class >= kCheapBelowClass) return samples;
  return std::min(kMaxSamples, std::max(samples, kCheapFactor * samples));
}

void round_order(std::uint64_t seed, unsigned round, std::span<std::uint8_t> order) {
  std::iota(order.begin(), order.end(), std::uint8_t{0});
  std::uint64_t state = draw(seed, round);
  // Fisher-Yates with our own generator: std::shuffle's result depends on
  // the standard library, and every rank must draw the same order.
  for (std::size_t i = order.size(); i > 1; --i) {
    state = mix(state);
    std::swap(order[i - 1], order[state % i]);
  }
}

double median(std::vector<double> v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double quantile(std::vector<double> v, double q) {
  // The nearest rank, halves rounded away from the median: 2 or 3 samples
  // give the full range, 4 the middle two (one outlier either side is
  // ignored, as the median ignores it).
  const double at = q * static_cast<double>(v.size() - 1);
  const auto k = static_cast<std::ptrdiff_t>(q < 0.5 ? std::ceil(at - 0.5) : std::floor(at + 0.5));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[static_cast<std::size_t>(k)];
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

}  // namespace mlxa2a::core::tune
