// mlxa2a_info's build and installation report: its own version and build
// configuration (-V, --version) and which shims exist and where (-V and, as
// comment lines, at the top of -c). Needs no MPI: a shim's build line is read
// from the file (the "@(#)" string of core/mpi/build_info.h), never loaded.
#pragma once

#include <string>
#include <vector>

namespace mlxa2a::core::info {

struct ShimReport {
  std::string family;      // "ompi" or "mpich"
  std::string path;        // empty when not found
  std::string build_line;  // the shim's embedded line; empty when unreadable
  std::vector<std::string> searched;
};

// The directories searched for shims, in order, as mlxa2a-run searches them:
// $MLXA2A_LIBDIR (colon-separated), <exe_dir>/<libdir relative to bindir>
// (an install, staged or relocated), <exe_dir>/../shim (a build tree).
std::vector<std::string> shim_search_dirs(const std::string& exe_dir);
// One report per MPI family this build made a shim for.
std::vector<ShimReport> find_shims(const std::string& exe_dir);
// The first "@(#)mlxa2a " line in a file, without the marker; "" if none.
std::string embedded_build_line(const std::string& path);
// The directory of the running executable ("" if /proc/self/exe is unreadable).
std::string own_directory();

// mlxa2a_info -V: version, build configuration, shims.
std::string render_version(const std::string& exe_dir);
// The same as '#' comment lines (still valid MLXA2A_CONFIG_FILE input).
std::string render_build_comment(const std::string& exe_dir);

}  // namespace mlxa2a::core::info
