// TuneFile: tuning decisions kept between runs (MLXA2A_TUNE_FILE, docs/tune.md).
// MPI-free.
//
// A text file, one decision per line, '#' starts a comment:
//   mpi=ompi ranks=4 nodes=1 ranks_per_node=4 oversubscribed=1 bytes=1K path=copy
// A site file (scripts/mlxa2a-tune) starts with four `made` lines, its Stamp
// (core/tune/stamp.h). The first five fields name the team's layout; bytes is the lower bound of a
// size class (a power of two, size suffixes allowed; the class holds
// [bytes, 2*bytes)); path a concrete Route name. A later line for the same layout
// and class replaces an earlier one.
//
// Values: immutable except for set(); not thread-safe (the runtime guards its
// copy with a mutex).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tune/size_class.h"
#include "core/tune/regular_file.h"

namespace mlxa2a::core::tune {

struct Layout {
  std::string mpi;  // MPI family: ompi or mpich
  int ranks = 0;
  int nodes = 0;
  int ranks_per_node = 0;  // the largest node's
  bool oversubscribed = false;
  friend bool operator==(const Layout&, const Layout&) = default;
};

// What a site tune file was made on (core/tune/stamp.h): the shim's build
// line, the MPI library's version, the node's HCAs and firmware ("none"), and
// MPI_COMM_WORLD's layout.
struct Stamp {
  std::string build;
  std::string mpi;
  std::string hca;
  Layout layout;
  friend bool operator==(const Stamp&, const Stamp&) = default;
};

struct FileEntry {
  Layout layout;
  unsigned size_class = 0;
  Route path = Route::pmpi;
  friend bool operator==(const FileEntry&, const FileEntry&) = default;
};

class TuneFile {
 public:
  // The largest file load() reads (and save() writes): about 11000 decisions.
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 20;

  // On failure returns nullopt and sets *error to the offending line and why.
  static std::optional<TuneFile> parse(std::string_view text, std::string* error);
  // A path with nothing at it reads as an empty TuneFile (the first run
  // creates it). An error (*error = "path: why"): a symbolic link at path, a
  // device, FIFO or anything but a regular file (never opened for reading, so
  // neither blocks nor reads without end), a file over kMaxBytes, a read error
  // or a malformed file. The result remembers what it was read from (see save()).
  static std::optional<TuneFile> load(const std::string& path, std::string* error);
  // Writes the decisions to path, atomically for readers (core/tune/regular_file.h:
  // a new mkstemp temporary beside path, mode 0666 & ~umask, renamed over path).
  // Only ever replaces nothing or a regular file that parses as a tune file;
  // when this TuneFile was loaded from path, only that same file (device and
  // inode; or still nothing), also re-checked just before the rename. Writes
  // nothing, and returns true, when path already holds these decisions. A
  // refusal returns false with *error = "path: why"; path is left as it is.
  bool save(const std::string& path, std::string* error) const;

  // Canonical text; parse(format()) gives an equal TuneFile.
  std::string format() const;
  std::optional<Route> lookup(const Layout& layout, unsigned size_class) const;
  void set(const Layout& layout, unsigned size_class, Route path);
  std::span<const FileEntry> entries() const { return entries_; }
  // What the file was made on; none for a file without `made` lines.
  const std::optional<Stamp>& stamp() const { return stamp_; }
  void set_stamp(Stamp s) { stamp_ = std::move(s); }
  // No decisions and no stamp; where it was read from stays (save() still
  // replaces only that file).
  void clear() {
    entries_.clear();
    stamp_.reset();
  }
  // Equal stamps and decisions, in any order (where a file was read from is
  // not compared).
  friend bool operator==(const TuneFile& a, const TuneFile& b);

 private:
  struct Origin {
    std::string path;
    FileIdentity found;
  };
  std::vector<FileEntry> entries_;  // one per (layout, class)
  std::optional<Stamp> stamp_;
  std::optional<Origin> origin_;    // set by load()
};

}  // namespace mlxa2a::core::tune
