// ClassTuner: the measured selection of one size class on one team, as a
// pure state machine (MPI-free; core/mpi/team_tuner.cc runs its agreements).
// Rules and the measurements behind them: docs/tune.md, "Agreement".
//
// Trying: rounds serve every candidate once, in an order drawn alike on
// every rank and reversed in odd rounds (tune::round_order), so no program
// period locks onto a candidate. At looks (MAX-agreed quartiles and median)
// a candidate clearly ahead of, or close to, every other (pmpi must be
// clearly beaten) is decided early, a far-behind one retired; after the
// last round tune::choose decides. A prior halves the rounds (not below
// kMinSamples). Some trial calls are timed but not kept (tune::unkept_for):
// a warm-up below 8 KiB per peer, lead-ins from 8 KiB.
//
// Decided: the decided path serves the class; at "events" (the class's
// first call at or after a call index drawn alike on every rank) it times
// the decided path or, every other event, another candidate in turn; with
// kWindow fresh samples each, the ranks agree again and may revise (same rule).
//
// Every input (candidates, samples, prior, seed, call indices, agreed
// numbers) is equal on all ranks, so all ranks take the same step at every
// call and agree at the same call. Not thread-safe: owned by one team,
// whose calls MPI serialises.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/tune/trials.h"

namespace mlxa2a::core::tune {

class ClassTuner {
 public:
  static constexpr unsigned kMaxCandidates = 8;
  // Steady-state samples per candidate between two agreements.
  static constexpr unsigned kWindow = 8;
  // Bounds of the steady state's spacing of probes, in communicator calls.
  static constexpr std::uint64_t kMinProbeSpacing = 64;
  static constexpr std::uint64_t kMaxProbeSpacing = std::uint64_t{1} << 16;
  // An agreement's assumed cost (most measured at np=4 on 2 cores), and the
  // share of the class's time the probes, and the agreements, may each take.
  static constexpr double kAgreementSeconds = 100e-6;
  static constexpr double kSteadyBudget = 0.01;
  // Stats per candidate in an agreement: lower quartile, median, upper.
  static constexpr std::size_t kStats = 3;
  // The fewest samples per candidate a prior leaves (the median of 3
  // survives one outlier), unless MLXA2A_TUNE_SAMPLES asks for fewer.
  static constexpr unsigned kMinSamples = 3;
  // Retire a candidate whose agreed lower quartile is this many times the
  // best agreed median (noise only adds time: its fastest calls are slow).
  static constexpr double kFarBehind = 2.0;

  // Warm-up rounds, and the fewest kept samples at a look after them.
  static constexpr unsigned kWarmRounds = 2;
  static constexpr unsigned kFirstLookKept = 2;
  // Lead-ins of a candidate's first slot: its first use of each slot set
  // (pmpi's own buffers warm up too).
  static constexpr unsigned kFirstLeadIns = 2;

  // candidates: 2..kMaxCandidates distinct routes, the fixed rules' choice
  // first; samples > 0: the most rounds; prior: index of a neighbouring
  // class's decision in candidates, or -1; seed: equal on every rank.
  ClassTuner(std::span<const Route> candidates, unsigned samples, int prior, std::uint64_t seed,
             Unkept unkept = Unkept::none);

  struct Step {
    Route path;
    // time it and pass the duration to record() (even a lead-in's: record()
    // advances the trials on every rank alike)
    bool timed;
    bool trial;  // a trial or a probe of another candidate (not the decided path)
    bool lead_in = false;  // a trial (lead-in or warm-up) whose duration record() will not keep
  };
  // Ignored after the first record() (before it, a mismatched call recorded
  // nothing and a neighbour may have decided since).
  void set_prior(int prior);
  // call: the communicator's call index (equal on every rank, increasing).
  Step next(std::uint64_t call);
  // After a timed step: its duration in seconds. true: the ranks must agree
  // now (agree(MAX over ranks of local_stats())).
  bool record(double seconds);
  // What this rank brings to an agreement: kStats doubles per candidate.
  std::vector<double> local_stats() const;
  enum class Outcome { undecided, decided, kept, revised };
  Outcome agree(std::span<const double> agreed);

  bool decided() const { return decided_; }
  Route path() const { return candidates_[chosen_]; }
  // The route of the step next() returned last.
  Route pending() const { return candidates_[pending_]; }
  std::span<const Route> candidates() const { return candidates_; }
  // The agreed medians of the last agreement, in candidates() order.
  std::span<const double> agreed_medians() const { return medians_; }
  // The first call index at which next() may do more than return the
  // decided path untimed (earlier calls may skip next(): a memo). 0 while trying.
  std::uint64_t next_event() const { return decided_ ? next_event_ : 0; }
  unsigned trial_calls() const { return trial_calls_; }
  unsigned agreements() const { return agreements_; }
  unsigned revisions() const { return revisions_; }

 private:
  unsigned rounds_done() const { return round_; }
  unsigned n() const { return static_cast<unsigned>(candidates_.size()); }
  bool retired(std::size_t c) const { return (retired_ >> c) & 1u; }
  unsigned active() const;
  std::size_t retire_far_behind(std::span<const double> agreed);
  bool agreement_due_trying() const;
  std::array<std::uint8_t, kMaxCandidates> trial_order(unsigned round) const;
  std::size_t clear_winner(std::span<const double> agreed, std::size_t against) const;
  void settle(std::size_t chosen, std::span<const double> agreed, std::uint64_t call);
  void schedule_event(std::uint64_t call);

  std::vector<Route> candidates_;
  std::uint64_t seed_;
  unsigned samples_;
  int prior_ = -1;
  unsigned max_rounds_, min_rounds_, check_every_;
  bool decided_ = false;
  std::size_t chosen_ = 0;
  std::vector<std::vector<double>> times_;  // per candidate, this phase's samples
  std::vector<double> medians_;             // agreed, per candidate
  std::size_t pending_ = 0;      // the candidate next() named last
  // Trying: the round, the position among its active candidates, retired (bit c).
  unsigned round_ = 0, pos_ = 0;
  std::uint32_t retired_ = 0;
  Unkept unkept_;
  unsigned leads_ = 0;  // lead-in calls served for the current slot
  // Class-call parity of each candidate's last kept call, -1 before its first.
  std::array<std::int8_t, kMaxCandidates> kept_parity_;
  int last_trial_ = -1;  // the candidate of the last trial call
  bool warming() const { return unkept_ == Unkept::warm_up && round_ < kWarmRounds; }
  // Whether the class's trial call number `call` (from 1) is a lead-in.
  bool lead_in_at(unsigned call) const;
  std::uint64_t last_call_ = 0;  // the call next() saw last
  unsigned trial_calls_ = 0, agreements_ = 0, revisions_ = 0;
  // Decided: the spacing of events, the next event, events so far.
  std::uint64_t spacing_ = kMinProbeSpacing, next_event_ = 0, events_ = 0;
};

}  // namespace mlxa2a::core::tune
