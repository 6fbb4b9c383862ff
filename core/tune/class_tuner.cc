#include "core/tune/class_tuner.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace mlxa2a::core::tune {

namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

double stat(std::span<const double> s, std::size_t cand, std::size_t which) {
  return s[cand * ClassTuner::kStats + which];
}
double q25(std::span<const double> s, std::size_t c) { return stat(s, c, 0); }
double med(std::span<const double> s, std::size_t c) { return stat(s, c, 1); }
double q75(std::span<const double> s, std::size_t c) { return stat(s, c, 2); }

// a is clearly ahead of b: its median at least the margin below b's, and
// the spread of both does not overlap (a's upper quartile below b's lower).
bool ahead(std::span<const double> s, std::size_t a, std::size_t b) {
  return med(s, a) <= (1.0 - kMargin) * med(s, b) && q75(s, a) < q25(s, b);
}

}  // namespace

ClassTuner::ClassTuner(std::span<const Route> candidates, unsigned samples, int prior,
                       std::uint64_t seed, Unkept unkept)
    : candidates_(candidates.begin(), candidates.end()),
      seed_(seed),
      samples_(samples),
      times_(candidates.size()),
      medians_(candidates.size(), 0.0),
      unkept_(unkept) {
  assert(candidates.size() >= 2 && candidates.size() <= kMaxCandidates);
  kept_parity_.fill(-1);
  set_prior(prior);
}

// Without a prior: a first look after 4 rounds, then every 4 (at most 3
// agreements at 12 samples). A prior halves the rounds (not below
// kMinSamples) and looks every 2; with a warm-up, not before round 4.
void ClassTuner::set_prior(int prior) {
  if (trial_calls_ != 0) return;
  prior_ = prior;
  const unsigned step = prior >= 0 ? 2 : 4;
  max_rounds_ =
      prior >= 0 ? std::max(samples_ / 2, std::min(samples_, kMinSamples)) : samples_;
  min_rounds_ = std::min(step, max_rounds_);
  check_every_ = step;
  if (unkept_ == Unkept::warm_up) {  // every look sees kept samples
    max_rounds_ = std::max(max_rounds_, kWarmRounds + kFirstLookKept);
    min_rounds_ = std::max(min_rounds_, kWarmRounds + kFirstLookKept);
  }
}

ClassTuner::Step ClassTuner::next(std::uint64_t call) {
  last_call_ = call;
  if (!decided_) {
    // The pos_-th active candidate of this round's order: retiring keeps
    // the others' relative order, so odd rounds still reverse even ones.
    const auto order = trial_order(round_);
    for (unsigned i = 0, seen = 0; i < n(); ++i) {
      if (!retired(order[i]) && seen++ == pos_) pending_ = order[i];
    }
    return {candidates_[pending_], true, true, warming() || lead_in_at(trial_calls_ + 1)};
  }
  if (call < next_event_) return {path(), false, false};
  if (events_ % 2 == 0) {
    pending_ = chosen_;
    return {path(), true, false};
  }
  // The others in turn, skipping the decided one.
  std::size_t other = (events_ / 2) % (n() - 1);
  if (other >= chosen_) ++other;
  pending_ = other;
  return {candidates_[pending_], true, true};
}

// Odd rounds reverse the round before: in each pair a candidate serves at
// positions p and n-1-p, calls whose indices differ by an odd number.
std::array<std::uint8_t, ClassTuner::kMaxCandidates> ClassTuner::trial_order(
    unsigned round) const {
  std::array<std::uint8_t, kMaxCandidates> order{};
  const unsigned count = n();
  round_order(seed_, round & ~1u, std::span(order.data(), count));
  if (round < 2 && prior_ >= 0) {  // the prior first
    unsigned at = 0;
    while (at + 1 < count && order[at] != prior_) ++at;
    for (; at > 0; --at) std::swap(order[at], order[at - 1]);
  }
  if (round % 2 == 1) {
    for (unsigned i = 0; i < count / 2; ++i) std::swap(order[i], order[count - 1 - i]);
  }
  return order;
}

bool ClassTuner::record(double seconds) {
  times_[pending_].push_back(seconds);
  if (!decided_) {
    ++trial_calls_;
    const bool lead_in = lead_in_at(trial_calls_);
    last_trial_ = static_cast<int>(pending_);
    if (lead_in) {  // the switch's cost: not kept
      times_[pending_].pop_back();
      ++leads_;
      return false;
    }
    leads_ = 0;
    kept_parity_[pending_] = static_cast<std::int8_t>(trial_calls_ % 2);
    if (warming()) times_[pending_].pop_back();  // a one-time cost: not kept
    if (++pos_ == active()) {
      pos_ = 0;
      ++round_;
    }
    return agreement_due_trying();
  }
  ++events_;
  schedule_event(last_call_);
  for (std::size_t c = 0; c < n(); ++c) {
    if (c != chosen_ && times_[c].size() < kWindow) return false;
  }
  return true;
}

// A slot's first call is a lead-in unless the trial call before was of the
// same path (a round's last slot and the reversed next round's first); a
// candidate's first slot takes two. In an odd round one more where needed
// so the kept call takes the other parity than the round before's; even
// rounds take any (a round-wide parity would cost lead-ins after first slots).
bool ClassTuner::lead_in_at(unsigned call) const {
  if (unkept_ != Unkept::lead_ins) return false;
  const int last = kept_parity_[pending_];
  if (last < 0) {
    if (leads_ < kFirstLeadIns) return true;
  } else if (leads_ == 0 && last_trial_ != static_cast<int>(pending_)) {
    return true;
  }
  return round_ % 2 == 1 && last == static_cast<int>(call % 2);
}

unsigned ClassTuner::active() const {
  return n() - static_cast<unsigned>(std::popcount(retired_));
}

bool ClassTuner::agreement_due_trying() const {
  if (pos_ != 0) return false;
  const unsigned r = rounds_done();
  return r >= max_rounds_ || (r >= min_rounds_ && (r - min_rounds_) % check_every_ == 0);
}

std::vector<double> ClassTuner::local_stats() const {
  std::vector<double> out;
  out.reserve(n() * kStats);
  for (const auto& t : times_) {
    if (t.empty()) {
      out.insert(out.end(), kStats, 0.0);
      continue;
    }
    out.push_back(quantile(t, 0.25));
    out.push_back(median(t));
    out.push_back(quantile(t, 0.75));
  }
  return out;
}

ClassTuner::Outcome ClassTuner::agree(std::span<const double> agreed) {
  ++agreements_;
  for (std::size_t c = 0; c < n(); ++c) medians_[c] = med(agreed, c);
  if (!decided_) {
    const std::size_t w = clear_winner(agreed, kNone);
    if (w != kNone) {
      settle(w, agreed, last_call_);
    } else if (rounds_done() >= max_rounds_) {
      settle(choose(candidates_, medians_), agreed, last_call_);
    } else if (const std::size_t best = retire_far_behind(agreed); active() == 1) {
      // Every other is far behind it (then it is mostly clearly ahead too,
      // and decided above): never serve rounds of one candidate.
      settle(best, agreed, last_call_);
    } else {
      return Outcome::undecided;
    }
    return Outcome::decided;
  }
  const std::size_t w = clear_winner(agreed, chosen_);
  const bool revise = w != kNone;
  settle(revise ? w : chosen_, agreed, last_call_);
  revisions_ += revise;
  return revise ? Outcome::revised : Outcome::kept;
}

// Retires the active candidates far behind the fastest active one (by the
// agreed numbers, so alike on every rank); returns that fastest one.
std::size_t ClassTuner::retire_far_behind(std::span<const double> s) {
  std::size_t best = kNone;
  for (std::size_t c = 0; c < n(); ++c) {
    if (!retired(c) && (best == kNone || med(s, c) < med(s, best))) best = c;
  }
  if (med(s, best) <= 0) return best;  // no timings (a fake clock of 0): nothing to weigh
  for (std::size_t c = 0; c < n(); ++c) {
    if (c != best && q25(s, c) >= kFarBehind * med(s, best)) retired_ |= 1u << c;
  }
  return best;
}

// against == kNone: the fastest candidate if clearly ahead of or close to
// (picking among close ones costs less than the margin) every other, but
// clearly ahead of pmpi. Else: the fastest but `against`, if clearly ahead of it.
std::size_t ClassTuner::clear_winner(std::span<const double> s, std::size_t against) const {
  std::size_t best = kNone;
  for (std::size_t c = 0; c < n(); ++c) {
    if (c != against && (best == kNone || med(s, c) < med(s, best))) best = c;
  }
  if (against != kNone) return ahead(s, best, against) ? best : kNone;
  for (std::size_t c = 0; c < n(); ++c) {
    if (c == best || ahead(s, best, c)) continue;
    const bool close = med(s, c) <= (1.0 + kMargin) * med(s, best);
    if (!close || (candidates_[c] == Route::pmpi && candidates_[best] != Route::pmpi)) {
      return kNone;
    }
  }
  return best;
}

// The probes' spacing from the agreed medians, so that probes and agreements
// each cost at most kSteadyBudget of the class's time (docs/tune.md, "Cost").
void ClassTuner::settle(std::size_t chosen, std::span<const double> agreed, std::uint64_t call) {
  decided_ = true;
  chosen_ = chosen;
  for (auto& t : times_) t.clear();
  const double mine = med(agreed, chosen);
  double spacing = static_cast<double>(kMaxProbeSpacing);
  if (mine > 0) {
    double worst = 1;
    for (std::size_t c = 0; c < n(); ++c) worst = std::max(worst, med(agreed, c) / mine);
    const double for_probes = (worst - 1) / kSteadyBudget;
    const double for_agreements =
        kAgreementSeconds / (kSteadyBudget * (n() - 1) * kWindow * mine);
    spacing = std::max(for_probes, for_agreements);
  }
  spacing = std::clamp(spacing, static_cast<double>(kMinProbeSpacing),
                       static_cast<double>(kMaxProbeSpacing));
  spacing_ = std::bit_ceil(static_cast<std::uint64_t>(spacing));
  schedule_event(call);
}

// Events fall on average every spacing_/2 calls, at a distance drawn alike on
// every rank: a fixed one could alias with a program's period.
void ClassTuner::schedule_event(std::uint64_t call) {
  next_event_ = call + 1 + draw(seed_, events_ + (std::uint64_t{revisions_} << 32)) % spacing_;
}

}  // namespace mlxa2a::core::tune
