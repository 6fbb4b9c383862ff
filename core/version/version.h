// What this build of mlxa2a is: version, `git describe`, and the build
// configuration, as text. Compile-time constants only (no state, thread-safe).
//
// Every shim also embeds one line of this in a string that starts with the
// SCCS "what" marker (kWhatMarker, core/mpi/build_info.h), so `strings` or
// `what` finds it and mlxa2a_info can read it from a shim file without loading it.
#pragma once

#include "core/version/build_config.h"
#include "core/version/git_describe.h"

namespace mlxa2a::core::version {

#define MLXA2A_WHAT_MARKER "@(#)"
inline constexpr const char* kWhatMarker = MLXA2A_WHAT_MARKER;
inline constexpr const char* kVersion = MLXA2A_VERSION;
inline constexpr const char* kGitDescribe = MLXA2A_GIT_DESCRIBE;
// "mlxa2a 0.1.0 (git 35912dd)"
#define MLXA2A_VERSION_LINE "mlxa2a " MLXA2A_VERSION " (git " MLXA2A_GIT_DESCRIBE ")"
inline constexpr const char* kVersionLine = MLXA2A_VERSION_LINE;
// "verbs: ..., gcc 12.2.0, release"
#define MLXA2A_BUILD_LINE \
  "verbs: " MLXA2A_BUILD_VERBS ", " MLXA2A_BUILD_COMPILER ", " MLXA2A_BUILD_TYPE
inline constexpr const char* kBuildLine = MLXA2A_BUILD_LINE;
// "ompi=4.1.4 mpich=4.0.2": the MPI families this build made shims for.
inline constexpr const char* kFamilies = MLXA2A_BUILD_FAMILIES;
inline constexpr const char* kLibdirFromBindir = MLXA2A_LIBDIR_FROM_BINDIR;

}  // namespace mlxa2a::core::version
