// Measured selection's pure helpers (MPI-free): samples per class, the
// trials' round order, medians and quartiles, the choice from agreed numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/tune/size_class.h"

namespace mlxa2a::core::tune {

// Keep PMPI unless a path is at least this much faster (issue 12: 5%).
inline constexpr double kMargin = 0.05;

// The most samples per candidate of a class, given MLXA2A_TUNE_SAMPLES: 4
// times as many (at most 64) below 8 KiB per peer, whose microsecond medians
// must survive a few preemptions of milliseconds (docs/tune.md, "Cost").
unsigned samples_for(unsigned size_class, unsigned samples);
// Which trial calls of a class are timed but not kept (docs/tune.md,
// "Warm-up" and "Lead-ins": what each keeps out, and why by size).
enum class Unkept : std::uint8_t {
  none,      // every trial call is kept (tests of the bare schedule)
  warm_up,   // each candidate's first two calls of the class (rounds 0 and 1)
  lead_ins,  // a lead-in call of the same path before each kept call (two before its first)
};
// Lead-ins from 8 KiB per peer; below, a warm-up (lead-ins would double the
// trials of microsecond calls; the warm-up adds no call to the first look).
Unkept unkept_for(unsigned size_class);

// Round `round`'s order of n <= 8 candidates: a permutation drawn from
// (seed, round) alone - equal on every rank, new each round, so no program
// period (say, in-place and normal calls alternating) locks onto one.
void round_order(std::uint64_t seed, unsigned round, std::span<std::uint8_t> order);
// A pseudo-random number that depends on (seed, i) alone (SplitMix64's mix).
std::uint64_t draw(std::uint64_t seed, std::uint64_t i);

// The median of v (mean of the middle two for an even count); v non-empty.
double median(std::vector<double> v);
// The q-quantile (0 <= q <= 1) of v: the sample at rank q(n-1), rounded to
// the nearest, halves away from the median; v non-empty.
double quantile(std::vector<double> v, double q);

// The index of the winner: the fastest candidate, unless it is not at least
// `margin` faster than pmpi (when pmpi is a candidate), then pmpi. Ties go to
// the earlier candidate. Pure: equal inputs give equal outputs on every rank.
std::size_t choose(std::span<const Route> candidates, std::span<const double> medians,
                   double margin = kMargin);

}  // namespace mlxa2a::core::tune
