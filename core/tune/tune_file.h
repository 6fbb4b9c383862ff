// TuneFile: tuning decisions kept between runs (MLXA2A_TUNE_FILE, docs/tune.md).
// MPI-free.
//
// A text file, one decision per line, '#' starts a comment:
//   mpi=ompi ranks=4 nodes=1 ranks_per_node=4 oversubscribed=1 bytes=1K path=copy
// The first five fields name the team's layout; bytes is the lower bound of a
// size class (a power of two, size suffixes allowed; the class holds
// [bytes, 2*bytes)); path a Candidate name. A later line for the same layout
// and class replaces an earlier one.
//
// Values: immutable except for set(); not thread-safe (the runtime guards its
// copy with a mutex).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tune/candidate.h"

namespace mlxa2a::core::tuning {

struct Layout {
  std::string mpi;  // MPI family: ompi or mpich
  int ranks = 0;
  int nodes = 0;
  int ranks_per_node = 0;  // the largest node's
  bool oversubscribed = false;
  friend bool operator==(const Layout&, const Layout&) = default;
};

struct FileEntry {
  Layout layout;
  unsigned size_class = 0;
  Candidate path = Candidate::pmpi;
  friend bool operator==(const FileEntry&, const FileEntry&) = default;
};

class TuneFile {
 public:
  // On failure returns nullopt and sets *error to the offending line and why.
  static std::optional<TuneFile> parse(std::string_view text, std::string* error);
  // A file that does not exist reads as an empty TuneFile (the first run
  // creates it); an unreadable or malformed one is an error.
  static std::optional<TuneFile> load(const std::string& path, std::string* error);
  // Writes format() to a temporary file beside path and renames it over path,
  // so a reader never sees half a file.
  bool save(const std::string& path, std::string* error) const;

  // Canonical text; parse(format()) gives an equal TuneFile.
  std::string format() const;
  std::optional<Candidate> lookup(const Layout& layout, unsigned size_class) const;
  void set(const Layout& layout, unsigned size_class, Candidate path);
  std::span<const FileEntry> entries() const { return entries_; }
  friend bool operator==(const TuneFile&, const TuneFile&) = default;

 private:
  std::vector<FileEntry> entries_;  // one per (layout, class)
};

}  // namespace mlxa2a::core::tuning
