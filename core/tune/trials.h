// Trials: the measurement of one size class on one team (MPI-free).
//
// The first calls of the class are served by the candidates in turn
// (interleaved: call i by candidates[i % n], so slow phases of a noisy machine
// hit every candidate alike) until each has `samples` timings. The caller then
// agrees on the per-candidate medians across ranks (MAX: a path is as slow as
// its slowest rank) and passes the agreed medians to choose().
//
// Every rank builds the same Trials (same candidates in the same order, same
// samples) and calls next()/record() once per call of the class, so all ranks
// are at the same trial at every call: complete() turns true at the same call
// everywhere, which is where the agreement happens.
//
// Not thread-safe: owned by one team, whose calls MPI serialises.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/tune/size_class.h"

namespace mlxa2a::core::tuning {

// Keep PMPI unless a path is at least this much faster (issue 12: 5%).
inline constexpr double kMargin = 0.05;

class Trials {
 public:
  // candidates: non-empty, no duplicates, the fixed rule's choice first;
  // samples > 0.
  Trials(std::span<const Route> candidates, unsigned samples);

  bool complete() const { return calls_ == total(); }
  // The candidate that serves the next call; only while !complete().
  Route next() const { return candidates_[calls_ % candidates_.size()]; }
  // The duration of the call next() named, in seconds.
  void record(double seconds);
  unsigned calls() const { return calls_; }
  unsigned total() const { return static_cast<unsigned>(candidates_.size()) * samples_; }

  std::span<const Route> candidates() const { return candidates_; }
  // Per candidate (in candidates() order) the median of its samples; only
  // when complete().
  std::vector<double> medians() const;

 private:
  std::vector<Route> candidates_;
  unsigned samples_;
  unsigned calls_ = 0;
  std::vector<double> times_;  // [candidate * samples + sample]
};

// Samples per candidate for a size class, given MLXA2A_TUNE_SAMPLES. Calls
// below 8 KiB per peer cost microseconds, where one preemption by another
// process (milliseconds) outweighs many calls: they take 4 times as many
// samples (at most 64), so that their medians survive a few such outliers.
// 8 KiB is also where OSU-style benchmarks drop from 100 warm-up calls to 10.
unsigned samples_for(unsigned size_class, unsigned samples);

// The median of v (mean of the middle two for an even count); v non-empty.
double median(std::vector<double> v);

// The index of the winner: the fastest candidate, unless it is not at least
// `margin` faster than pmpi (when pmpi is a candidate), then pmpi. Ties go to
// the earlier candidate. Pure: equal inputs give equal outputs on every rank.
std::size_t choose(std::span<const Route> candidates, std::span<const double> medians,
                   double margin = kMargin);

}  // namespace mlxa2a::core::tuning
