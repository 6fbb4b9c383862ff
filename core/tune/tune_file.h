// TuneFile: tuning decisions kept between runs (MLXA2A_TUNE_FILE, docs/tune.md).
// MPI-free. A text file, one decision per line, '#' starts a comment:
//   mpi=ompi ranks=4 nodes=1 ranks_per_node=4 oversubscribed=1 bytes=1K path=copy
// (a site file starts with four `made` lines, core/tune/stamp.h). bytes is a
// size class's lower bound (a power of two, suffixes allowed); path a
// concrete Route name. A later line for the same layout and class wins.
//
// Immutable except for set(); not thread-safe (the runtime holds a mutex).
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

// What a site tune file was made on (core/tune/stamp.h).
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
  // The largest file load() reads and save() writes (~11000 decisions).
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 20;

  // nullopt on failure; *error: the offending line and why.
  static std::optional<TuneFile> parse(std::string_view text, std::string* error);
  // Nothing at path reads as empty (the first run creates it). Refused
  // (*error = "path: why"): what read_regular_file() refuses, a malformed
  // file. The result remembers what it was read from (see save()).
  static std::optional<TuneFile> load(const std::string& path, std::string* error);
  // Writes to path by replace_regular_file(). Replaces only nothing or a
  // regular file that parses as a tune file and, when loaded from path, only
  // that same file (or still nothing), re-checked before the rename. Writes
  // nothing, returns true, when path already holds these decisions. Refused:
  // false, *error = "path: why", path left as it is.
  bool save(const std::string& path, std::string* error) const;

  // Canonical text; parse(format()) gives an equal TuneFile.
  std::string format() const;
  std::optional<Route> lookup(const Layout& layout, unsigned size_class) const;
  void set(const Layout& layout, unsigned size_class, Route path);
  std::span<const FileEntry> entries() const { return entries_; }
  // What the file was made on; none for a file without `made` lines.
  const std::optional<Stamp>& stamp() const { return stamp_; }
  void set_stamp(Stamp s) { stamp_ = std::move(s); }
  // No decisions, no stamp; the origin stays (save() replaces only it).
  void clear() {
    entries_.clear();
    stamp_.reset();
  }
  // Equal stamps and decisions, in any order; the origin is not compared.
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
