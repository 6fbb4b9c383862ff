// Stamp: what a tune file was made on (docs/tune.md, "Site tuning"). MPI-free.
// A stamped file is used only where build, mpi, hca and layout all match the
// job's; otherwise it is ignored whole. Stamp is declared in tune_file.h.
// In the file: four header lines, each at most once, all four or none:
//   made build <the shim's build line>
//   made mpi <the first line of MPI_Get_library_version>
//   made hca <device fw version>[; <device fw version>...] | none
//   made layout mpi=ompi ranks=4 nodes=2 ranks_per_node=2 oversubscribed=1
#pragma once

#include <string>
#include <string_view>

#include "core/tune/tune_file.h"

namespace mlxa2a::core::tune {

// Why a file stamped `made` does not fit a job stamped `here` ("" when it
// fits): the first of build, mpi, hca, layout that differs, with both values.
std::string stamp_mismatch(const Stamp& made, const Stamp& here);

// A value fit for a header line: one line, no '#' (a comment there), spaces
// collapsed, trimmed, at most 256 characters; "unknown" when empty.
std::string stamp_value(std::string_view text);

// `made hca`: every device under sysfs_root (normally /sys/class/infiniband)
// with its fw_ver, by name, "; "-separated; "none" when there is none.
std::string hca_identity(const std::string& sysfs_root);

}  // namespace mlxa2a::core::tune
