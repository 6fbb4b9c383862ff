// TuneStore: what measured selection knows beyond one team (docs/tune.md).
//
// * The tune file: MLXA2A_TUNE_FILE, or when that is unset the site file
//   <MLXA2A_TUNE_SITE_DIR>/tune-<family>.txt that scripts/mlxa2a-tune made
//   ("Site tuning"). Read at MPI_Init; a stamped file (core/tune/stamp.h)
//   made on another build, MPI, HCA or layout is ignored as a whole, with
//   one warning (world rank 0). MLXA2A_TUNE_FILE is written back at
//   MPI_Finalize by world rank 0 (stamped with MLXA2A_TUNE_STAMP=y, or when
//   the file read was); the site file never is.
// * Shared decisions (issue 40 item 4): the classes a team decided by
//   measurement, kept per (layout, set of MPI_COMM_WORLD ranks), so that a
//   later communicator of the same processes (a dup, a split with the same
//   members) starts decided. Why every rank of such a team holds the same
//   entry at its class's first call without any message: shared_decision().
//
// Thread safety: one mutex; touched at initialisation, at a class's first
// call and at its decisions, never per call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/switches.h"
#include "core/mpi/team.h"
#include "core/route/route.h"
#include "core/tune/tune_file.h"

namespace mlxa2a::core::mpi {

// The MPI family name used in tune files: ompi or mpich.
std::string_view tune_family() noexcept;

// The site file for these settings: <tune_site_dir>/tune-<family>.txt, or ""
// when MLXA2A_TUNE_SITE_DIR is empty.
std::string site_tune_path(const config::Settings& s);
// Whether a regular file is at site_tune_path(s) (lstat only; local).
bool site_tune_file_present(const config::Settings& s) noexcept;

// The processes of a team, as shared decisions are keyed.
struct ShareKey {
  tune::Layout layout;
  std::vector<int> world_ranks;  // sorted
};

// At MPI_Init, after the switches' agreement (collective there), with what
// it agreed: whether any rank has a site file, and whether every rank may
// share decisions (no rank provides MPI_THREAD_MULTIPLE). Loads the file.
void open_tune_store(const config::Settings& s, bool any_site_file, bool share,
                     int world_rank) noexcept;
// After MPI_COMM_WORLD's node discovery: a stamped file whose stamp does not
// fit this job (world: world's node map; nullptr when unknown) is dropped.
void check_tune_stamp(const Team::Origin* world) noexcept;
// The layout of a node map (as a team of those ranks has it).
tune::Layout layout_of(const Team::Origin& map);
// At MPI_Finalize, on world rank 0: writes MLXA2A_TUNE_FILE back.
void close_tune_store(const config::Settings& s) noexcept;

// Whether teams consult a tune file at a class's first call (one
// PMPI_Allreduce there): MLXA2A_TUNE_FILE is set, or a site file exists on
// some rank. Equal on every rank.
bool tune_store_uses_file() noexcept;
// The file's decision for layout and class (the file as read at MPI_Init).
std::optional<Route> file_decision(const tune::Layout& layout, unsigned size_class) noexcept;
// A team's measured decision, kept for MLXA2A_TUNE_FILE's write-back and
// shared with later teams of the same processes (key: nullptr for none).
void note_decision(const tune::Layout& layout, const ShareKey* key, unsigned size_class,
                   Route path) noexcept;

// Whether decisions are shared in this job (equal on every rank).
bool tune_store_shares() noexcept;
// The decision a team of the same processes made for this class, if any.
//
// Why every rank of a new team gets the same answer at the class's first
// call: an entry is written on each member of the deciding team right
// after that team's agreement (a PMPI_Allreduce over all of them), inside
// its MPI_Alltoall. A new team with the same set of processes has the same
// members; on each of them, that agreement came before or after this first
// call in program order. Had one member seen it before and another after,
// the first would have finished the agreement (which needed the second in
// it) and then entered this alltoall, while the second entered the
// agreement only after this alltoall finished (which needed the first in
// it): no correct program does that, the MPI alone would hang there too.
// Threads break the argument (two communicators' calls may interleave in
// any order), so under MPI_THREAD_MULTIPLE on any rank nothing is shared.
std::optional<Route> shared_decision(const ShareKey& key, unsigned size_class) noexcept;
// Whether any team of this process shared a decision yet (then a new team
// computes its key; with none, every lookup would miss on every rank).
bool shared_decisions_exist() noexcept;

}  // namespace mlxa2a::core::mpi
