// ClassTuner (core/tune/class_tuner.h): measured selection's state machine,
// MPI-free. Several ranks are simulated in one process: each has its own
// ClassTuner and clock, and an agreement is the element-wise MAX of their
// local_stats(), as PMPI_Allreduce(MAX) gives in core/mpi/team_tuner.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/config/fake_clock.h"
#include "core/tune/class_tuner.h"

namespace mlxa2a::core::tune {
namespace {

using C = Route;
using config::FakeClock;

// The duration of a call (seconds) at a rank, on a path, at a communicator
// call index (1-based).
using Cost = std::function<double(int rank, Route path, std::uint64_t call)>;

struct Team {
  std::vector<ClassTuner> ranks;
  std::vector<std::vector<Route>> served;  // per rank, every call's path
  std::vector<Route> decisions;            // after each decision or revision
  std::uint64_t decided_at = 0;            // the call of the first decision
  std::uint64_t probes = 0;                // steady-state calls of another path
  std::vector<std::uint64_t> kept;         // trial calls whose duration is kept

  Team(std::span<const Route> list, unsigned samples, int prior, unsigned nranks,
       std::uint64_t seed = 7, Unkept unkept = Unkept::none) {
    for (unsigned r = 0; r < nranks; ++r) {
      ranks.emplace_back(list, samples, prior, seed, unkept);
    }
    served.resize(nranks);
  }

  // Calls 1..last. Even ranks skip next() while a memo may serve the call,
  // as core/mpi/dispatch.cc does; odd ranks ask at every call. Every rank
  // must take the same path at every call and agree at the same calls.
  void run(std::uint64_t first, std::uint64_t last, const Cost& cost) {
    for (std::uint64_t call = first; call <= last; ++call) {
      std::vector<bool> due(ranks.size());
      for (std::size_t r = 0; r < ranks.size(); ++r) {
        ClassTuner& t = ranks[r];
        if (r % 2 == 0 && t.decided() && call < t.next_event()) {
          served[r].push_back(t.path());
          continue;
        }
        const ClassTuner::Step s = t.next(call);
        served[r].push_back(s.path);
        if (r == 0 && t.decided() && s.trial) ++probes;
        if (r == 0 && !t.decided() && !s.lead_in) kept.push_back(call);
        if (s.timed) due[r] = t.record(cost(static_cast<int>(r), s.path, call));
      }
      for (std::size_t r = 1; r < ranks.size(); ++r) {
        ASSERT_EQ(served[r].back(), served[0].back()) << "call " << call << " rank " << r;
        ASSERT_EQ(due[r], due[0]) << "call " << call << " rank " << r;
      }
      if (due[0]) agree(call);
    }
  }

  void agree(std::uint64_t call) {
    std::vector<double> agreed = ranks[0].local_stats();
    for (const ClassTuner& t : ranks) {
      const auto mine = t.local_stats();
      for (std::size_t i = 0; i < agreed.size(); ++i) agreed[i] = std::max(agreed[i], mine[i]);
    }
    const auto outcome = ranks[0].agree(agreed);
    for (std::size_t r = 1; r < ranks.size(); ++r) ASSERT_EQ(ranks[r].agree(agreed), outcome);
    if (outcome == ClassTuner::Outcome::decided || outcome == ClassTuner::Outcome::revised) {
      decisions.push_back(ranks[0].path());
      if (decided_at == 0) decided_at = call;
    }
  }
  const ClassTuner& rank0() const { return ranks[0]; }
};

// Deterministic noise in [1 - amp, 1 + amp], a function of (rank, call).
double noise(int rank, std::uint64_t call, double amp) {
  const double u = static_cast<double>(draw(static_cast<std::uint64_t>(rank), call) % 1000) / 999;
  return 1 + amp * (2 * u - 1);
}

Cost from_clock(const FakeClock& clock, double amp = 0.02) {
  return [clock, amp](int rank, Route p, std::uint64_t call) {
    return *clock.seconds(rank, p) * noise(rank, call, amp);
  };
}

TEST(ClassTuner, EachRoundIsAPermutationAndRoundsDiffer) {
  for (unsigned n = 2; n <= ClassTuner::kMaxCandidates; ++n) {
    std::vector<unsigned> first;
    unsigned differ = 0;
    for (unsigned round = 0; round < 16; ++round) {
      std::vector<std::uint8_t> order(n);
      round_order(n, round, order);
      std::vector<unsigned> sorted(order.begin(), order.end());
      const std::vector<unsigned> drawn = sorted;
      std::sort(sorted.begin(), sorted.end());
      for (unsigned i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << n << " " << round;
      if (round == 0) first = drawn;
      differ += drawn != first;
    }
    EXPECT_GT(differ, 0u) << n;
  }
}

// MPICH's alltoall1 alternates normal and in-place calls of one size. Here
// pmpi costs 10 us on even calls and 2 us on odd ones (5.9 on average), copy
// 5 us on both: copy is the faster per call. Serving candidate i mod n
// timed pmpi on odd calls only and chose it.
TEST(ClassTuner, APeriodTwoProgramTimesEveryCandidateOnBothKinds) {
  const C lists[][4] = {{C::copy, C::pmpi, C::cma, C::line}, {C::copy, C::pmpi, C::cma, C::line}};
  for (unsigned n = 2; n <= 4; ++n) {
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      Team team(std::span(lists[0], n), 12, -1, 2, seed);
      std::vector<unsigned> even(n), odd(n);
      const Cost cost = [&](int, Route p, std::uint64_t call) {
        if (p == C::pmpi) return (call % 2 ? 2.0 : 10.0) * 1e-6;
        return (p == C::copy ? 5.0 : 20.0) * 1e-6;
      };
      team.run(1, 4 * n, cost);  // four rounds: no decision yet
      for (std::uint64_t call = 1; call <= 4 * n; ++call) {
        const auto i = static_cast<std::size_t>(
            std::find(lists[0], lists[0] + n, team.served[0][call - 1]) - lists[0]);
        ++(call % 2 ? odd : even)[i];
      }
      for (unsigned i = 0; i < n; ++i) {
        EXPECT_EQ(even[i], 2u) << "n " << n << " seed " << seed << " candidate " << i;
        EXPECT_EQ(odd[i], 2u) << "n " << n << " seed " << seed << " candidate " << i;
      }
      team.run(4 * n + 1, 16 * n, cost);
      ASSERT_FALSE(team.decisions.empty());
      EXPECT_EQ(team.decisions.front(), C::copy) << "n " << n << " seed " << seed;
    }
  }
}

// With lead-ins (classes from 8 KiB) the kept calls of a period-2 program
// still fall on both kinds for every candidate: in an odd round a candidate
// takes one more lead-in where needed to flip its kept call's parity. 4
// rounds take at most 2 calls per slot, one more per candidate's first slot
// and per slot of the odd rounds.
TEST(ClassTuner, WithLeadInsAPeriodTwoProgramStillKeepsBothKinds) {
  const C list[] = {C::copy, C::pmpi, C::cma, C::line};
  for (unsigned n = 2; n <= 4; ++n) {
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      Team team(std::span(list, n), 12, -1, 2, seed, Unkept::lead_ins);
      const Cost cost = [&](int, Route p, std::uint64_t call) {
        if (p == C::pmpi) return (call % 2 ? 2.0 : 10.0) * 1e-6;
        return (p == C::copy ? 5.0 : 20.0) * 1e-6;
      };
      std::uint64_t four_rounds = 0;
      while (team.kept.size() < 4 * n) {
        ++four_rounds;
        team.run(four_rounds, four_rounds, cost);
      }
      ASSERT_LE(four_rounds, 8 * n + n + 2 * n);
      std::vector<unsigned> even(n), odd(n);
      for (const std::uint64_t call : team.kept) {
        const auto i = static_cast<std::size_t>(
            std::find(list, list + n, team.served[0][call - 1]) - list);
        ++(call % 2 ? odd : even)[i];
      }
      for (unsigned i = 0; i < n; ++i) {
        EXPECT_EQ(even[i], 2u) << "n " << n << " seed " << seed << " candidate " << i;
        EXPECT_EQ(odd[i], 2u) << "n " << n << " seed " << seed << " candidate " << i;
      }
      team.run(four_rounds + 1, 40 * n, cost);
      ASSERT_FALSE(team.decisions.empty());
      EXPECT_EQ(team.decisions.front(), C::copy) << "n " << n << " seed " << seed;
    }
  }
}

// The first call of a path after a call of another one pays for the switch
// (here copy 20 times its cost; pmpi and cma nothing), as the copy path's
// trials did on an oversubscribed node (bench/results/selection.md). A
// program that keeps one path never pays it: with lead-ins the trials keep
// only calls that follow a call of the same path, and copy (5 us against
// 10) is chosen. Without them every trial call follows a switch: pmpi.
TEST(ClassTuner, WithLeadInsTheCostOfASwitchIsNotKept) {
  const C list[] = {C::pmpi, C::copy, C::cma};
  for (const bool lead_ins : {false, true}) {
    Team team(list, 3, -1, 2, 7, lead_ins ? Unkept::lead_ins : Unkept::none);
    const Cost base = from_clock(*FakeClock::parse("pmpi=10,copy=5,cma=30"));
    team.run(1, 100, [&](int rank, Route p, std::uint64_t call) {
      const auto& mine = team.served[static_cast<std::size_t>(rank)];
      const bool switched = call >= 2 && mine[call - 2] != p;
      return base(rank, p, call) * (switched && p == C::copy ? 20 : 1);
    });
    ASSERT_FALSE(team.decisions.empty());
    EXPECT_EQ(team.decisions.front(), lead_ins ? C::copy : C::pmpi) << lead_ins;
  }
}

// A path's first calls at a new size pay one-time costs: the shared-memory
// engine alternates two slot sets by its call parity (every engine call
// advances it, pmpi does not), and the first use of each set's new pages
// costs page faults - at 2 KiB on Open MPI np=4 copy's first two calls took
// 130-350 us, its later ones 14-30 (bench/results/selection.md). Modelled
// here: copy and line 12 times their cost on the first use of each parity,
// cma 3 times, and pmpi 2 times on its first call. Records rank 0's calls
// that were a first use.
struct FirstUses {
  std::vector<std::uint64_t> calls;  // rank 0's
  std::vector<std::uint64_t> seq;
  std::vector<std::vector<int>> used;
  Cost base;
  explicit FirstUses(unsigned nranks, const FakeClock& clock)
      : seq(nranks, 0),
        used(nranks, std::vector<int>(kConcreteRoutes * 2, 0)),
        base(from_clock(clock)) {}
  double operator()(int rank, Route p, std::uint64_t call) {
    const auto r = static_cast<std::size_t>(rank);
    if (p != C::pmpi) ++seq[r];
    const auto slot = static_cast<std::size_t>(p) * 2 + (p == C::pmpi ? 0 : seq[r] % 2);
    const bool first = used[r][slot]++ == 0;
    const double factor = !first ? 1 : p == C::cma ? 3 : p == C::pmpi ? 2 : 12;
    if (first && rank == 0) calls.push_back(call);
    return base(rank, p, call) * factor;
  }
  std::size_t kept_first_uses(const std::vector<std::uint64_t>& kept) const {
    std::size_t k = 0;
    for (const std::uint64_t call : kept) k += std::count(calls.begin(), calls.end(), call);
    return k;
  }
};

// Without a warm-up and with copy as the neighbour's prior, the first look
// (after 2 rounds) kept only copy's first uses: copy was beaten or retired,
// for every seed. With the warm-up (what classes below 8 KiB get) no kept
// sample is a first use - a candidate's two warm-up calls cover both
// parities - and copy wins.
TEST(ClassTuner, AWarmUpKeepsNoFirstUseCost) {
  const C list[] = {C::copy, C::pmpi, C::cma, C::line};
  const FakeClock clock = *FakeClock::parse("copy=15,pmpi=45,cma=35,line=25");
  for (unsigned n = 3; n <= 4; ++n) {
    for (const int prior : {-1, 0}) {
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        for (const bool production : {false, true}) {
          const Unkept unkept = production ? unkept_for(11) : Unkept::none;  // 2 KiB per peer
          const std::string at = "n " + std::to_string(n) + " prior " + std::to_string(prior) +
                                 " seed " + std::to_string(seed) +
                                 (production ? " as below 8 KiB" : " none");
          Team team(std::span(list, n), 12, prior, 4, seed, unkept);
          FirstUses first(4, clock);
          team.run(1, 200, std::ref(first));
          ASSERT_FALSE(team.decisions.empty()) << at;
          if (!production) {
            if (prior == 0) {
              EXPECT_NE(team.decisions.front(), C::copy) << at;
            }
            continue;
          }
          EXPECT_EQ(first.kept_first_uses(team.kept), 0u) << at;
          EXPECT_EQ(team.decisions.front(), C::copy) << at;
          // The first look comes after 4 rounds, as without a warm-up.
          EXPECT_EQ(team.decided_at, 4u * n) << at;
        }
      }
    }
  }
}

// From 8 KiB (lead-ins) the same first uses. A candidate's first slot takes
// two lead-ins, consecutive calls of its path, so both slot sets' first uses
// fall in them and no kept sample holds one (with one lead-in the kept call
// was the first use of the other set: 8 KiB, Open MPI np=4, 400-6000 us
// against 40-60). With copy as the prior, the first look after 2 rounds
// then sees copy clearly ahead and decides; with its first use kept, copy's
// median of 2 held it and the class took a third round.
TEST(ClassTuner, LeadInsKeepNoFirstUseCost) {
  const C list[] = {C::copy, C::pmpi, C::cma};
  const FakeClock clock = *FakeClock::parse("copy=15,pmpi=45,cma=35");
  for (unsigned n = 2; n <= 3; ++n) {
    for (const int prior : {-1, 0}) {
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        const std::string at = "n " + std::to_string(n) + " prior " + std::to_string(prior) +
                               " seed " + std::to_string(seed);
        Team team(std::span(list, n), samples_for(13, 3), prior, 4, seed, unkept_for(13));
        FirstUses first(4, clock);
        team.run(1, 200, std::ref(first));
        ASSERT_FALSE(team.decisions.empty()) << at;
        EXPECT_EQ(first.kept_first_uses(team.kept), 0u) << at;
        EXPECT_EQ(team.decisions.front(), C::copy) << at;
        // Decided at the first look: 2 kept rounds with the prior, else 3.
        ASSERT_GE(team.kept.size(), (prior >= 0 ? 2u : 3u) * n) << at;
        EXPECT_EQ(team.decided_at, team.kept[(prior >= 0 ? 2 : 3) * n - 1]) << at;
        // What that costs: round 0 3n calls, round 1 at most 3n - 2 (its first
        // slot continues round 0's last path: no lead-in, and the next call
        // has the other parity; the others may need a parity lead-in), round 2
        // at most 2n. A lead-in there too made it 8n (6n with the prior).
        EXPECT_LE(team.rank0().trial_calls(), (prior >= 0 ? 6 : 8) * n - 2) << at;
      }
    }
  }
}

// Several engine paths close to each other (within the margin) and all
// clearly ahead of pmpi: which of them serves matters less than the margin,
// so the first look decides, for the fastest.
TEST(ClassTuner, StopsEarlyAmongCloseCandidatesClearlyAheadOfPmpi) {
  const C list[] = {C::copy, C::pmpi, C::cma, C::line};
  Team team(list, 12, -1, 2);
  team.run(1, 100, from_clock(*FakeClock::parse("pmpi=50,copy=31,cma=32,line=30")));
  EXPECT_EQ(team.decisions, (std::vector<C>{C::line}));
  EXPECT_EQ(team.rank0().trial_calls(), 16u);
}

// One path clearly ahead: decided at the first look, after 4 rounds (16
// trial calls with 4 candidates instead of 4 x 12 = 48) and one agreement.
TEST(ClassTuner, StopsEarlyWhenOneIsClearlyAhead) {
  const C list[] = {C::copy, C::pmpi, C::cma, C::line};
  Team team(list, 12, -1, 3);
  team.run(1, 200, from_clock(*FakeClock::parse("pmpi=10,copy=2,cma=5,line=4")));
  ASSERT_EQ(team.decisions.size(), 1u);
  EXPECT_EQ(team.decisions[0], C::copy);
  EXPECT_EQ(team.rank0().trial_calls(), 16u);
  EXPECT_EQ(team.decided_at, 16u);
  EXPECT_EQ(team.rank0().agreements(), 1u);
}

// Paths within the spread of each other: every sample is taken, then the
// margin rule keeps pmpi (3 agreements: after rounds 4, 8 and 12).
TEST(ClassTuner, TakesEverySampleWhenNoneIsClearlyAhead) {
  const C list[] = {C::copy, C::pmpi, C::cma};
  Team team(list, 12, -1, 2);
  team.run(1, 36, from_clock(*FakeClock::parse("pmpi=100,copy=98,cma=120"), 0.1));
  ASSERT_EQ(team.decisions.size(), 1u);
  EXPECT_EQ(team.decisions[0], C::pmpi);
  EXPECT_EQ(team.rank0().trial_calls(), 36u);
  EXPECT_EQ(team.rank0().agreements(), 3u);
}

// A neighbouring class's decision is served first and halves the rounds:
// with 12 samples, a look after 2 rounds, at most 6.
TEST(ClassTuner, APriorGoesFirstAndShortensTheTrials) {
  const C list[] = {C::pmpi, C::copy, C::cma};
  Team clear(list, 12, 2, 2);
  clear.run(1, 1, from_clock(*FakeClock::parse("pmpi=10,copy=4,cma=3")));
  EXPECT_EQ(clear.served[0][0], C::cma);
  clear.run(2, 100, from_clock(*FakeClock::parse("pmpi=10,copy=4,cma=3")));
  EXPECT_EQ(clear.decided_at, 6u);
  EXPECT_EQ(clear.decisions, (std::vector<C>{C::cma}));
  Team close(list, 12, 1, 2);
  close.run(1, 100, from_clock(*FakeClock::parse("pmpi=100,copy=99,cma=98"), 0.02));
  EXPECT_EQ(close.rank0().trial_calls(), 18u);  // 6 rounds, not 12
  EXPECT_EQ(close.decisions, (std::vector<C>{C::pmpi}));
}

// Issue 26: from 8 KiB per peer a class takes 3 samples, and a prior
// halved that to 1, so one preempted call (here copy's first trial on rank
// 1, 100 times its cost, as a descheduled rank on a loaded node) decided the
// class for the rest of a short run. A prior still goes first but leaves 3
// samples, and the median of 3 survives the outlier.
TEST(ClassTuner, APriorLeavesThreeSamplesSoOnePreemptedCallCannotDecide) {
  const C list[] = {C::copy, C::pmpi, C::cma};
  Team team(list, 3, 0, 2);
  const Cost base = from_clock(*FakeClock::parse("pmpi=10,copy=5,cma=15"));
  team.run(1, 50, [&](int rank, Route p, std::uint64_t call) {
    return base(rank, p, call) * (rank == 1 && call == 1 ? 100 : 1);
  });
  EXPECT_EQ(team.served[0][0], C::copy);  // the prior first: the preempted call
  EXPECT_EQ(team.decisions, (std::vector<C>{C::copy}));
  EXPECT_EQ(team.rank0().trial_calls(), 9u);
}

// A candidate far behind at a look that decides nothing (cma 4 times slower;
// copy ahead of pmpi at the first look but not clearly) is not served in the
// later rounds: its 4 trials of the first look only, and the second look
// decides: 20 trial calls (before: all 12 rounds, 36 calls, 12 of cma).
TEST(ClassTuner, ACandidateFarBehindIsNotRepeated) {
  const C list[] = {C::copy, C::pmpi, C::cma};
  Team team(list, 12, -1, 2);
  team.run(1, 60, from_clock(*FakeClock::parse("pmpi=100,copy=98,cma=400"), 0.1));
  EXPECT_EQ(team.decisions, (std::vector<C>{C::pmpi}));
  EXPECT_EQ(team.rank0().agreements(), 2u);
  EXPECT_EQ(team.rank0().trial_calls(), 20u);
  EXPECT_EQ(std::count(team.served[0].begin(), team.served[0].begin() + 20, C::cma), 4);
}

// A size mismatch (an erroneous program) records nothing, and may create a
// class's tuner on one rank before a neighbour is decided: the prior is
// what holds at the first recorded call, so it may change until then only.
TEST(ClassTuner, ThePriorMayChangeUntilTheFirstRecord) {
  const C list[] = {C::pmpi, C::copy, C::cma};
  ClassTuner t(list, 12, -1, 7);
  t.set_prior(2);
  EXPECT_EQ(t.next(1).path, C::cma);
  t.record(1e-6);
  t.set_prior(1);  // too late: ignored
  ClassTuner same(list, 12, 2, 7);
  same.next(1);
  same.record(1e-6);
  for (std::uint64_t call = 2; call <= 6; ++call) {
    ASSERT_EQ(t.next(call).path, same.next(call).path);
    EXPECT_EQ(t.record(1e-6), same.record(1e-6)) << call;
  }
}

// Ranks with skewed clocks: a rank alone would pick another path; the MAX
// agreement gives every rank the same numbers, and the same path at every
// call, trials and steady state alike.
TEST(ClassTuner, SkewedRanksTakeTheSamePathAtEveryCall) {
  const C list[] = {C::line, C::pmpi, C::copy, C::cma};
  Team team(list, 12, -1, 3);
  team.run(1, 5000,
           from_clock(*FakeClock::parse("pmpi=10,line=2,copy=3,cma=4;1:line=20;2:copy=1,cma=30")));
  ASSERT_FALSE(team.decisions.empty());
  EXPECT_EQ(team.decisions.front(), C::copy);
  EXPECT_EQ(team.rank0().path(), C::copy);
}

// Paths whose costs change after N calls: copy wins the trials, then turns
// 4 times slower at call 3000; the probes of pmpi see it and the ranks
// revise to pmpi within a few agreement intervals. Until then no revision.
TEST(ClassTuner, ACostThatChangesLaterIsRevised) {
  const C list[] = {C::copy, C::pmpi};
  Team team(list, 12, -1, 2);
  const FakeClock before = *FakeClock::parse("pmpi=10,copy=5");
  const FakeClock after = *FakeClock::parse("pmpi=10,copy=20");
  const Cost cost = [&](int rank, Route p, std::uint64_t call) {
    return *(call <= 3000 ? before : after).seconds(rank, p) * noise(rank, call, 0.05);
  };
  team.run(1, 3000, cost);
  EXPECT_EQ(team.decisions, (std::vector<C>{C::copy}));
  EXPECT_EQ(team.rank0().revisions(), 0u);
  team.run(3001, 12000, cost);
  EXPECT_EQ(team.decisions, (std::vector<C>{C::copy, C::pmpi}));
  EXPECT_EQ(team.served[0].back(), C::pmpi);
  // The steady state's cost: probes of the other path are about 1 call in
  // the spacing (256 here: copy 5 us, pmpi 10 us, one agreement a 100 us).
  EXPECT_LT(team.probes, 12000u / 128);
}

// A disturbed first phase (copy 10 times slower during its trials, as when
// another process takes the core) makes pmpi win; once copy runs at its
// real cost the probes find it and the decision recovers.
TEST(ClassTuner, ADisturbedFirstPhaseRecovers) {
  const C list[] = {C::pmpi, C::copy, C::cma};
  Team team(list, 12, -1, 2);
  const FakeClock disturbed = *FakeClock::parse("pmpi=10,copy=50,cma=30");
  const FakeClock quiet = *FakeClock::parse("pmpi=10,copy=5,cma=30");
  const Cost cost = [&](int rank, Route p, std::uint64_t call) {
    return *(call <= 40 ? disturbed : quiet).seconds(rank, p) * noise(rank, call, 0.05);
  };
  team.run(1, 40000, cost);
  ASSERT_GE(team.decisions.size(), 2u);
  EXPECT_EQ(team.decisions.front(), C::pmpi);
  EXPECT_EQ(team.decisions.back(), C::copy);
  EXPECT_EQ(team.rank0().path(), C::copy);
}

// Noise wider than the difference never flips a decision, and the steady
// state's agreements stay rare: copy 10 us, pmpi 11 us, 20% noise.
TEST(ClassTuner, NoiseDoesNotFlipADecision) {
  const C list[] = {C::copy, C::pmpi};
  Team team(list, 12, -1, 2);
  team.run(1, 100000, from_clock(*FakeClock::parse("pmpi=11,copy=10"), 0.2));
  ASSERT_EQ(team.decisions.size(), 1u);
  EXPECT_EQ(team.rank0().revisions(), 0u);
  // Probes every 128 calls (100 us / (1% x 8 x 10 us) = 125, rounded up to
  // a power of two), an agreement every 8 probes: about 98 in 100000
  // calls, plus at most 3 in the trials.
  EXPECT_LE(team.rank0().agreements(), 105u);
  EXPECT_GE(team.rank0().agreements(), 80u);
}

// 1 us calls: an agreement (taken as 100 us) would cost 1% only every
// 12500 calls, so the probes are 2048 calls apart and there are few
// agreements.
TEST(ClassTuner, CheapCallsAgreeRarely) {
  const C list[] = {C::copy, C::pmpi};
  Team team(list, 12, -1, 2);
  team.run(1, 100000, from_clock(*FakeClock::parse("pmpi=2,copy=1")));
  EXPECT_EQ(team.decisions, (std::vector<C>{C::copy}));
  EXPECT_LE(team.rank0().agreements(), 1u + 100000u / (8 * 2048) + 1);
  EXPECT_LE(team.probes, 100000u / 1024);
}

}  // namespace
}  // namespace mlxa2a::core::tune
