// TeamTuner: measured path selection for one team (docs/tune.md).
//
// Per size class (tune::size_class) a team goes through three phases:
//   fresh    -> its first call. With a tune file (MLXA2A_TUNE_FILE, or a
//               site file on some rank), one PMPI_Allreduce checks that
//               every rank holds the same decision for this layout and
//               class; if so the class is decided for good (no trials, no
//               probes). Else a decision an earlier team of the same
//               processes made (tune_store.h, shared_decision) decides it,
//               for good too, without a message.
//   trying   -> calls are served by the candidates in rounds and timed; at a
//   decided     round's end now and then, and in steady state now and then,
//               one PMPI_Allreduce (MAX of per-candidate quartiles and
//               medians) agrees; tune::ClassTuner (core/tune/class_tuner.h,
//               MPI-free) decides, stops early, probes and revises.
// Every input is equal on all ranks (bytes per peer, the class's call count,
// the communicator's call index, the team's agreed engine properties,
// all-equal switches), so every rank enters each allreduce at the same call
// and ends with the same decision.
//
// Thread safety: a TeamTuner belongs to one communicator's CommState, whose
// calls MPI serialises. The process-wide tune store is mutex-guarded.
// Nothing here throws out of a noexcept function.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/config/switches.h"
#include "core/tune/size_class.h"
#include "core/config/fake_clock.h"
#include "core/tune/class_tuner.h"
#include "core/tune/quiet.h"
#include "core/tune/tune_file.h"
#include "core/mpi/tune_store.h"

namespace mlxa2a::core::mpi {

class Team;

class TeamTuner {
 public:
  // nullptr when there is nothing to choose: MLXA2A_TUNE_SAMPLES=0, a team
  // of one rank, or no engine. Local; team must have completed its set-up.
  static std::unique_ptr<TeamTuner> create(const Team& team, const config::Settings& settings,
                                            int world_rank) noexcept;

  struct Step {
    Route path;
    bool timed;          // time the call and pass its duration to finish_trial()
    bool trial;          // a trial, or a probe of a path other than the decided one
    const char* reason;  // for the trace; valid while this TeamTuner lives
    // Calls of this size with comm call index below this may repeat the path
    // without begin() (a memo); 0: none may.
    std::uint64_t repeat_until;
    bool fixed = false;  // the fixed rules' route: selection could not run (out of memory)
  };
  // The path of one call of bytes_per_peer (> 0) bytes; `fixed` is what the
  // fixed rules choose for it (tried first); call: the call's index among
  // the communicator's calls (equal on every rank). Collective over comm at
  // a class's first call when a tune file is configured.
  Step begin(std::uint64_t bytes_per_peer, Route fixed, std::uint64_t call, MPI_Comm comm) noexcept;
  // Whether begin() for this size enters a collective (a fresh class with a
  // tune file), so that a caller can first make sure every rank calls with
  // this size. Local.
  bool begin_is_collective(std::uint64_t bytes_per_peer) const noexcept;
  // After a timed call that took `seconds` on this rank (replaced by
  // MLXA2A_DEBUG_TUNE_TIMES where it names the path). When the class's
  // ClassTuner asks: one PMPI_Allreduce over comm, then a decision (or none
  // yet, or a revision). Returns the agreement's duration in seconds, or a
  // negative value when this call agreed nothing.
  double finish_trial(std::uint64_t bytes_per_peer, double seconds, MPI_Comm comm) noexcept;

  // Quiet PMPI (core/tune/quiet.h, docs/tune.md): whether call number `call`
  // (CommState::calls) is served by PMPI_Alltoall without the engine's check
  // call. Called by every call on the communicator that could reach the
  // engine or a check (dispatch.cc), at least once per call; idempotent
  // within a call. Enters quiet at the first such call after an agreement
  // decided a class, when no class is decided for an engine, on a
  // multi-node team; at a boundary, one PMPI_Allreduce over comm decides
  // whether a held class ends it. trace: say so in the call trace.
  bool quiet(std::uint64_t call, MPI_Comm comm, bool trace) noexcept;
  // While quiet(): the class of bytes_per_peer is decided pmpi (its trace
  // reason into *reason), or not yet: then it is held on PMPI, to be
  // measured once a boundary ends quiet (returns false).
  bool quiet_serves(std::uint64_t bytes_per_peer, const char** reason) noexcept;
  // While quiet(): the call index of its next boundary, where a memo of a
  // quiet call must end (CommState::Repeat::until).
  std::uint64_t quiet_until() const noexcept { return quiet_.next_boundary(); }
  // Whether the team could be quiet (no class decided for an engine, no
  // engine rule; multi-node, not contained): dispatch.cc times a pmpi trial
  // with the check beside PMPI only where it cannot.
  bool quiet_eligible() const noexcept;

  TeamTuner(const TeamTuner&) = delete;
  TeamTuner& operator=(const TeamTuner&) = delete;

 private:
  TeamTuner(const Team& team, const config::Settings& settings, int world_rank);
  struct ClassState {
    enum class Phase : std::uint8_t { fresh, trying, decided } phase = Phase::fresh;
    Route path = Route::pmpi;
    std::unique_ptr<tune::ClassTuner> tuner;  // trying, or decided by measurement
    // A revision writes the other one: a memo may still point at the old
    // text (it is expired by then; this keeps it valid anyway).
    std::string reasons[2];
    std::string& reason() { return reasons[revision % 2]; }
    unsigned revision = 0;
  };
  int prior(unsigned size_class, const std::vector<Route>& list) const;
  void describe(ClassState& cs, double agreement_seconds);
  std::vector<Route> candidates(unsigned size_class, Route fixed) const;
  bool decided_by_file(unsigned size_class, ClassState& cs,
                       const std::vector<Route>& list, MPI_Comm comm);
  bool decided_by_share(unsigned size_class, ClassState& cs,
                        const std::vector<Route>& list, MPI_Comm comm);
  const ShareKey* share_key(MPI_Comm comm);
  void agree(unsigned size_class, ClassState& cs, MPI_Comm comm, double* agreement_seconds);

  const Team& team_;
  tune::Layout layout_;
  unsigned samples_;
  bool use_file_;  // equal on every rank (tune_store_uses_file)
  bool share_;     // equal on every rank (tune_store_shares)
  std::optional<ShareKey> key_;  // share_key()
  int world_rank_;
  config::FakeClock fake_;
  std::array<ClassState, tune::kSizeClasses> classes_;
  // Quiet PMPI: possible only without MLXA2A_TUNE rules that force an
  // engine (their sizes reach it unmeasured); decisions_ counts agreed
  // decisions, quiet_seen_ the count quiet() last looked at.
  bool engine_rules_ = false;
  std::uint64_t decisions_ = 0;
  std::uint64_t quiet_seen_ = 0;
  tune::QuietPmpi quiet_;
};

}  // namespace mlxa2a::core::mpi
