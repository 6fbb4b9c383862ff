#include "core/mpi/team_tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "core/log.h"
#include "core/mpi/job_stats.h"
#include "core/mpi/team.h"
#include "core/mpi/tune_store.h"

namespace mlxa2a::core::mpi {

namespace {


// Trace reasons of trial calls, by Route.
constexpr const char* kTrialReason[] = {"tuning: trial of pmpi", "tuning: trial of line",
                                        "tuning: trial of copy", "tuning: trial of cma",
                                        "tuning: trial of hier", "tuning: trial of rdma",
                                        "tuning: trial of zcopy"};
static_assert(std::size(kTrialReason) == kConcreteRoutes);
// Steady-state samples of a path other than the decided one.
constexpr const char* kProbeReason[] = {"tuning: probe of pmpi", "tuning: probe of line",
                                        "tuning: probe of copy", "tuning: probe of cma",
                                        "tuning: probe of hier", "tuning: probe of rdma",
                                        "tuning: probe of zcopy"};
static_assert(std::size(kProbeReason) == kConcreteRoutes);

}  // namespace

TeamTuner::TeamTuner(const Team& team, const config::Settings& s, int world_rank)
    : team_(team),
      layout_{std::string(tune_family()), team.size(), team.caps().nodes, team.ranks_per_node(),
              team.oversubscribed()},
      samples_(s.tune_samples),
      use_file_(tune_store_uses_file()),
      share_(tune_store_shares()),
      world_rank_(world_rank),
      fake_(config::FakeClock::parse(s.debug_tune_times).value_or(config::FakeClock{})) {
  for (const config::rules::Rule& r : s.tune.rules()) {
    engine_rules_ |= r.route == Route::shm || r.route == Route::rdma;
  }
}

std::unique_ptr<TeamTuner> TeamTuner::create(const Team& team, const config::Settings& s,
                                               int world_rank) noexcept {
  const bool engine = (team.caps().shm && team.engine_is(EngineProps::Kind::node)) ||
                      (team.caps().hier && team.engine_is(EngineProps::Kind::hier));
  if (s.tune_samples == 0 || team.size() < 2 || !engine) return nullptr;
  try {
    return std::unique_ptr<TeamTuner>(new TeamTuner(team, s, world_rank));
  } catch (...) {
    // Allocation only. This rank then follows the fixed rules while its peers
    // tune: out of memory the job is lost anyway; this keeps the exception
    // from crossing MPI_Alltoall.
    return nullptr;
  }
}

// The fixed rules' choice first, then the others in a fixed order. Only the
// team's agreed properties enter, so the list is the same on every rank.
std::vector<Route> TeamTuner::candidates(unsigned cls, Route fixed) const {
  std::vector<Route> list;
  auto add = [&](Route c) {
    if (std::find(list.begin(), list.end(), c) == list.end()) list.push_back(c);
  };
  const std::uint64_t largest = (std::uint64_t{2} << cls) - 1;  // of the class (cls < 63 here)
  const EngineProps* node = team_.caps().shm && team_.engine_is(EngineProps::Kind::node)
                                ? team_.engine_props()
                                : nullptr;
  const bool line_fits = node && cls < 63 && largest <= node->line_max;
  if (fixed == Route::line && !line_fits) fixed = Route::copy;
  add(fixed);
  add(Route::pmpi);
  if (node) {
    if (line_fits) add(Route::line);
    add(Route::copy);
    if (node->cma_usable) add(Route::cma);
  }
  // A multi-node team's leaders exchange over the transport agreed at its
  // set-up, so its hierarchical engine is one candidate: rdma or hier.
  if (team_.caps().hier && team_.engine_is(EngineProps::Kind::hier)) {
    add(team_.caps().rdma ? Route::rdma : Route::hier);
    // Zero-copy is its own candidate: its cost (registration, gathers)
    // differs from the staged fan-in's.
    if (team_.caps().zcopy) add(Route::zcopy);
  }
  return list;
}

bool TeamTuner::decided_by_file(unsigned cls, ClassState& cs, const std::vector<Route>& list,
                                 MPI_Comm comm) {
  int index = -1;
  if (const auto path = file_decision(layout_, cls)) {
    const auto it = std::find(list.begin(), list.end(), *path);
    if (it != list.end()) index = static_cast<int>(it - list.begin());
  }
  // MAX of (index, -index): every rank holds the same usable decision iff
  // the maximum index equals the minimum and is not -1.
  const int mine[2] = {index, -index};
  int all[2] = {-1, 1};
  if (PMPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return false;
  if (all[0] < 0 || all[0] != -all[1]) return false;
  cs.phase = ClassState::Phase::decided;
  cs.path = list[static_cast<std::size_t>(all[0])];
  cs.reason() = "tune file: " + std::string(to_string(cs.path));
  ++decisions_;
  return true;
}

bool TeamTuner::begin_is_collective(std::uint64_t bytes) const noexcept {
  return use_file_ && classes_[tune::size_class(bytes)].phase == ClassState::Phase::fresh;
}

// A neighbouring class's decision on this team, if it is a candidate here:
// the index in list, else -1. Decisions are agreed, so this is equal on all
// ranks.
int TeamTuner::prior(unsigned cls, const std::vector<Route>& list) const {
  for (const unsigned near : {cls - 1, cls + 1}) {
    if (near >= tune::kSizeClasses || classes_[near].phase != ClassState::Phase::decided) {
      continue;
    }
    const auto it = std::find(list.begin(), list.end(), classes_[near].path);
    if (it != list.end()) return static_cast<int>(it - list.begin());
  }
  return -1;
}

TeamTuner::Step TeamTuner::begin(std::uint64_t bytes, Route fixed, std::uint64_t call,
                                   MPI_Comm comm) noexcept {
  constexpr std::uint64_t kForever = UINT64_MAX;
  const unsigned cls = tune::size_class(bytes);
  ClassState& cs = classes_[cls];
  if (cs.phase == ClassState::Phase::fresh) {
    try {
      const std::vector<Route> list = candidates(cls, fixed);
      if ((use_file_ && decided_by_file(cls, cs, list, comm)) ||
          decided_by_share(cls, cs, list, comm)) {
        return {cs.path, false, false, cs.reason().c_str(), kForever};
      }
      // The class index seeds the trial order: equal on every rank, and
      // classes of one team do not all share one order.
      cs.tuner = std::make_unique<tune::ClassTuner>(list, tune::samples_for(cls, samples_),
                                                      prior(cls, list), 0x6d6c7861u + cls,
                                                      tune::unkept_for(cls));
      cs.phase = ClassState::Phase::trying;
    } catch (...) {
      // Allocation only (as in create()): out of memory the job is lost
      // anyway; this keeps the exception from crossing MPI_Alltoall.
      return {fixed, false, false, "tuning: out of memory, fixed rules", 0, true};
    }
  }
  if (!cs.tuner) return {cs.path, false, false, cs.reason().c_str(), kForever};
  if (cs.tuner->trial_calls() == 0) {
    // The prior as of the class's first recorded call, equal on every rank
    // (an earlier, mismatched call may have made the tuner on this rank only).
    try {
      cs.tuner->set_prior(prior(cls, candidates(cls, fixed)));
    } catch (...) {
      return {fixed, false, false, "tuning: out of memory, fixed rules", 0, true};
    }
  }
  const tune::ClassTuner::Step s = cs.tuner->next(call);
  const auto i = static_cast<std::size_t>(s.path);
  const char* reason = !cs.tuner->decided() ? kTrialReason[i]
                       : s.trial            ? kProbeReason[i]
                                            : cs.reason().c_str();
  return {s.path, s.timed, s.trial, reason, cs.tuner->next_event()};
}

double TeamTuner::finish_trial(std::uint64_t bytes, double seconds, MPI_Comm comm) noexcept {
  const unsigned cls = tune::size_class(bytes);
  ClassState& cs = classes_[cls];
  if (!cs.tuner) return -1;
  try {
    if (!cs.tuner->record(fake_.seconds(world_rank_, cs.tuner->pending()).value_or(seconds))) {
      return -1;
    }
    double agreement = 0;
    agree(cls, cs, comm, &agreement);
    return agreement;
  } catch (...) {
    cs.phase = ClassState::Phase::decided;  // allocation only: see agree()
    cs.tuner.reset();
    cs.path = Route::pmpi;
    ++cs.revision;
    cs.reason() = "tuning failed: pmpi";
    return -1;
  }
}

// No class decided for an engine (classes still trying, or never met, are
// held on PMPI while quiet: a warm-up call of another size must not keep a
// team checked for good), on a multi-node team whose engine still runs and
// whose MLXA2A_TUNE rules send no size to an engine unmeasured. The same on
// every rank after the same agreements.
bool TeamTuner::quiet_eligible() const noexcept {
  if (engine_rules_ || !team_.engine_is(EngineProps::Kind::hier) || team_.contained()) {
    return false;
  }
  for (const ClassState& cs : classes_) {
    if (cs.phase == ClassState::Phase::decided && cs.path != Route::pmpi) return false;
  }
  return true;
}

bool TeamTuner::quiet(std::uint64_t call, MPI_Comm comm, bool trace) noexcept {
  if (!quiet_.on()) {
    // Entered only at the first call after an agreement decided a class,
    // which every rank runs at the same call (quiet.h). Not after a trial:
    // a class being measured would be held again at once.
    if (decisions_ == quiet_seen_) return false;
    quiet_seen_ = decisions_;
    if (!quiet_eligible()) return false;
    quiet_.enter(call);
    if (trace) log::trace("quiet pmpi: on from call %llu", static_cast<unsigned long long>(call));
    return true;
  }
  if (quiet_.due(call)) {
    // A failed allreduce leaves quiet: checks are the side that never skips.
    int mine = quiet_.pending() ? 1 : 0, any = 1;
    if (PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) any = 1;
    quiet_.agreed(any != 0, call);
    if (trace && any) {
      log::trace("quiet pmpi: off from call %llu (a size class held on PMPI is measured next)",
                 static_cast<unsigned long long>(call));
    }
  }
  return quiet_.on();
}

bool TeamTuner::quiet_serves(std::uint64_t bytes, const char** reason) noexcept {
  ClassState& cs = classes_[tune::size_class(bytes)];
  if (cs.phase == ClassState::Phase::decided && cs.path == Route::pmpi) {
    *reason = cs.reason().c_str();
    return true;
  }
  quiet_.note_pending();
  *reason = "quiet pmpi: size class held on PMPI until quiet ends";
  return false;
}

void TeamTuner::agree(unsigned cls, ClassState& cs, MPI_Comm comm, double* agreement_seconds) {
  const std::vector<double> local = cs.tuner->local_stats();
  std::vector<double> agreed(local.size(), 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = PMPI_Allreduce(local.data(), agreed.data(), static_cast<int>(local.size()),
                                MPI_DOUBLE, MPI_MAX, comm);
  *agreement_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != MPI_SUCCESS) {
    // The error handler returned; PMPI serves the class on this rank, and a
    // rank whose allreduce failed cannot trust its peers to agree anyway.
    MLXA2A_LOG(Warn, "tuning agreement failed; PMPI serves bytes per peer from %llu",
               static_cast<unsigned long long>(std::uint64_t{1} << cls));
    cs.phase = ClassState::Phase::decided;
    cs.tuner.reset();
    cs.path = Route::pmpi;
    ++cs.revision;
    cs.reason() = "tuning agreement failed: pmpi";
    engine_rules_ = true;  // this rank cannot know its peers' state: never quiet
    return;
  }
  using Outcome = tune::ClassTuner::Outcome;
  const Outcome outcome = cs.tuner->agree(agreed);
  if (outcome == Outcome::undecided || outcome == Outcome::kept) return;
  cs.phase = ClassState::Phase::decided;
  cs.path = cs.tuner->path();
  cs.revision += outcome == Outcome::revised;
  ++decisions_;  // quiet PMPI is (re)considered at the next call
  describe(cs, *agreement_seconds);
  const auto list = cs.tuner->candidates();
  const auto medians = cs.tuner->agreed_medians();
  // MLXA2A_COLL_STATS=json: every decision and revision.
  job_stats::note_decision(team_.size(), cls, cs.path, list,
                           std::vector<double>(medians.begin(), medians.end()),
                           *agreement_seconds);
  note_decision(layout_, share_key(comm), cls, cs.path);
}

// The processes of this team, once (local: a group translation); nullptr
// when decisions are not shared (tune_store.h), or the team has a member
// outside MPI_COMM_WORLD.
const ShareKey* TeamTuner::share_key(MPI_Comm comm) {
  if (!share_) return nullptr;
  if (!key_) {
    std::vector<int> ranks = world_ranks_of(comm, team_.size());
    std::sort(ranks.begin(), ranks.end());
    key_ = ShareKey{layout_, std::move(ranks)};
  }
  return key_->world_ranks.empty() ? nullptr : &*key_;
}

// A decision of an earlier team of the same processes (tune_store.h says
// why every rank finds the same one), if it is a candidate here. Local.
bool TeamTuner::decided_by_share(unsigned cls, ClassState& cs, const std::vector<Route>& list,
                                  MPI_Comm comm) {
  // Nothing shared on this rank: a miss on every rank (an entry here or
  // there would be on all of them, tune_store.h), without the key's cost.
  if (!share_ || !shared_decisions_exist()) return false;
  const ShareKey* key = share_key(comm);
  const auto path = key ? shared_decision(*key, cls) : std::nullopt;
  if (!path || std::find(list.begin(), list.end(), *path) == list.end()) return false;
  cs.phase = ClassState::Phase::decided;
  cs.path = *path;
  cs.reason() = "shared: " + std::string(to_string(cs.path)) +
                " (decided on another communicator of these processes)";
  ++decisions_;
  return true;
}

// The trace's reason for the decided path's calls.
void TeamTuner::describe(ClassState& cs, double agreement_seconds) {
  const tune::ClassTuner& t = *cs.tuner;
  const auto list = t.candidates();
  char buf[96];
  cs.reason() = "tuned: " + std::string(to_string(cs.path)) + " (max-over-ranks medians us:";
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::snprintf(buf, sizeof buf, " %.*s=%.2f", static_cast<int>(to_string(list[i]).size()),
                  to_string(list[i]).data(), t.agreed_medians()[i] * 1e6);
    cs.reason() += buf;
  }
  std::snprintf(buf, sizeof buf, "; %u trial calls, %u agreements%s, agreement %.1f us)",
                t.trial_calls(), t.agreements(), t.revisions() ? ", revised" : "",
                agreement_seconds * 1e6);
  cs.reason() += buf;
}

}  // namespace mlxa2a::core::mpi
