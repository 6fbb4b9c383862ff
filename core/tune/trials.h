// Measured selection's pure helpers (MPI-free): how many samples a class
// takes, the round order of the trials, medians and quartiles, and the choice
// from agreed numbers. The per-class state machine is core/tune/class_tuner.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/tune/size_class.h"

namespace mlxa2a::core::tune {

// Keep PMPI unless a path is at least this much faster (issue 12: 5%).
inline constexpr double kMargin = 0.05;

// Samples per candidate for a size class, given MLXA2A_TUNE_SAMPLES. Calls
// below 8 KiB per peer cost microseconds, where one preemption by another
// process (milliseconds) outweighs many calls: they take 4 times as many
// samples (at most 64), so that their medians survive a few such outliers.
// 8 KiB is also where OSU-style benchmarks drop from 100 warm-up calls to 10.
// The most a class takes: early stop (class_tuner.h) usually ends sooner.
unsigned samples_for(unsigned size_class, unsigned samples);
// Which trial calls of a class are timed but not kept (class_tuner.h).
enum class Unkept : std::uint8_t {
  none,      // every trial call is kept (tests of the bare schedule)
  warm_up,   // each candidate's first two calls of the class (rounds 0 and 1)
  lead_ins,  // a lead-in call of the same path before each kept call (two before its first)
};
// From 8 KiB per peer lead-ins, where a path switch's cost was measured to
// decide the trials (bench/results/selection.md); below, a warm-up: a path's
// first calls at a new size pay one-time costs (page faults in both of the
// shared-memory engine's slot sets: 5-20 times its later calls at 2-4 KiB,
// Open MPI np=4), and with a neighbour's prior the first look saw nothing
// else (issue 26). Lead-ins below 8 KiB would double the trials of
// microsecond calls; the warm-up adds no call to a class's first look.
Unkept unkept_for(unsigned size_class);

// The order in which round `round` of a class's trials serves its n
// candidates: a permutation of 0..n-1 drawn from a PRNG seeded by (seed,
// round) alone, so it is the same on every rank, and changes from round to
// round, so no program period (say, in-place and normal calls alternating)
// locks onto one candidate. n <= 8.
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
