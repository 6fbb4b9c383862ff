// ClassTuner: the measured selection of one size class on one team, as a
// pure state machine (MPI-free; core/mpi/team_tuner.cc runs its agreements).
//
// Trying. Calls are served in rounds: each round serves every candidate
// once, in an order drawn per round from a PRNG seeded alike on every rank
// (tune::round_order), odd rounds the reverse of the round before, so no
// program period can lock onto a candidate and a period-2 program (in-place
// and normal calls alternating) times every candidate on both kinds within
// each pair of rounds. After min_rounds, and then every check_every rounds,
// the ranks agree (MAX over ranks of each candidate's quartiles and median):
// when the fastest candidate is clearly ahead of every other - its median at
// least kMargin below the other's and its upper quartile below the other's
// lower one - or close to it (medians within kMargin; pmpi must be clearly
// beaten), it is decided at once (early stop); after max_rounds
// tune::choose decides. A prior (a
// neighbouring class's decision on this team) is served first and halves
// the rounds, but never below kMinSamples: one sample per candidate let a
// single preempted call decide (issue 26). At a look that decides nothing, a
// candidate far behind (its lower quartile at least kFarBehind times the
// best median) is retired: later rounds skip it, so a losing path's trials
// cost little (its samples still count in the choice; probes still visit it).
//
// Warm-up (classes below 8 KiB per peer: tune::unkept_for). A path's first
// calls at a new size pay one-time costs - page faults in pages of the
// shared-memory engine's slots that no smaller size touched, in each of its
// two slot sets (used by call parity) - that a program pays once, not per
// call: at 2 KiB on an oversubscribed node copy's first two calls took 5-20
// times its later ones, and with a neighbour's prior the first look (2
// rounds) kept nothing else, so copy was beaten or retired for the run
// (issue 26). So rounds 0 and 1 are timed but not kept. A candidate serves
// at positions p and n-1-p in them, with the same other candidates twice
// between: an even number of engine calls, so its two calls use both slot
// parities. The first look still comes after 4 rounds (2 kept samples).
//
// Lead-in calls (classes from 8 KiB per peer: tune::unkept_for). A
// candidate's first call after a call of another path pays for the switch
// (on an oversubscribed node the copy path's trials measured 2-60 times its
// steady state: bench/results/selection.md), which a program that keeps one
// path never pays. So each trial slot is a lead-in call, timed but not
// kept, then the kept call (no lead-in when the trial call before was of
// the same path: a round's last slot and the reversed next round's first).
// A candidate's first slot takes two lead-ins:
// its first two calls at the new size are the first uses of the engine's
// two slot sets (consecutive calls of one engine path alternate them), whose
// page faults cost copy 20-100 times its later calls (issue 26); pmpi's and
// cma's second calls were slow too. In an odd round a candidate takes one
// more lead-in where needed so that its kept call falls on the other parity
// of the class's calls than its kept call of the round before: with the
// reversed order, a period-2 program (in-place and normal calls
// alternating) has every candidate kept on both kinds within each pair of
// rounds.
//
// Decided. The decided path serves the class, and the class keeps sampling
// at a low rate: at "events" (the first call of the class at or after a
// communicator call index drawn from a PRNG, equal on every rank) it times
// the decided path and, at every other event, one of the other candidates in
// turn. When every candidate has kWindow fresh samples the ranks agree again
// and the decision is revised if another candidate is clearly ahead by the
// same rule. The event spacing is chosen from the agreed medians so that the
// probes and the agreements each cost at most about 1% of the class's time
// (docs/tune.md, Cost).
//
// Every input (candidates, samples, prior, seed, call indices, agreed
// numbers) is equal on all ranks, so all ranks take the same step at every
// call and need an agreement at the same call. Not thread-safe: owned by one
// team, whose calls MPI serialises.
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
  // What one agreement is assumed to cost (the most measured at np=4 on 2
  // cores, bench/results/selection.md) and the share of the class's time the
  // probes, and the agreements, may each take.
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

  // Warm-up rounds (above), and the fewest kept samples at a look after them.
  static constexpr unsigned kWarmRounds = 2;
  static constexpr unsigned kFirstLookKept = 2;
  // Lead-ins (below) of a candidate's first slot: its first use of each slot
  // set, and a second call of pmpi (whose own buffers also warm up).
  static constexpr unsigned kFirstLeadIns = 2;

  // candidates: 2..kMaxCandidates distinct routes, the fixed rules' choice
  // first; samples > 0: the most rounds; prior: the index of a neighbouring
  // class's decision in candidates, or -1; seed: equal on every rank;
  // unkept: which trial calls are not kept (above).
  ClassTuner(std::span<const Route> candidates, unsigned samples, int prior, std::uint64_t seed,
             Unkept unkept = Unkept::none);

  struct Step {
    Route path;
    // time it and pass the duration to record() (a lead-in's is not kept,
    // but its record() is what advances the trials on every rank alike)
    bool timed;
    bool trial;  // a trial or a probe of another candidate (not the decided path)
    bool lead_in = false;  // a trial (lead-in or warm-up) whose duration record() will not keep
  };
  // Until the first record(): the prior may change (a call that ended in a
  // size mismatch records nothing, and the neighbour's decision may come
  // between it and the class's first recorded call). Ignored after.
  void set_prior(int prior);
  // The step of this call; call: its index among the communicator's calls
  // (equal on every rank, increasing).
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
  // The first communicator call index at which next() may do more than
  // return the decided path untimed; earlier calls of the class may skip
  // next() altogether (a memo). 0 while trying.
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
  // Trying: the round, the position in it (among active candidates), and
  // the retired candidates (bit c: candidate c).
  unsigned round_ = 0, pos_ = 0;
  std::uint32_t retired_ = 0;
  Unkept unkept_;
  unsigned leads_ = 0;  // lead-in calls served for the current slot
  // Lead-ins: the class-call parity (call % 2) of each candidate's last kept
  // call, -1 before its first (its first slot takes kFirstLeadIns).
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
