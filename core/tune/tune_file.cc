#include "core/tune/tune_file.h"

#include <algorithm>

#include "core/config/parse.h"

namespace mlxa2a::core::tune {

namespace {

using config::parse_int;
using config::parse_size;
using config::trim;

// The fields of one line: key=value tokens, each key of `keys` exactly once.
// Returns the reason when the line is not that.
template <std::size_t N>
std::string split_fields(std::string_view line, const std::string_view (&keys)[N],
                         std::string_view (&value)[N]) {
  bool seen[N] = {};
  while (!line.empty()) {
    const std::size_t space = line.find_first_of(" \t");
    const std::string_view token = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : trim(line.substr(space));
    const std::size_t eq = token.find('=');
    std::size_t k = 0;
    while (k < N && (eq == std::string_view::npos || token.substr(0, eq) != keys[k])) ++k;
    if (k == N) return "unknown field '" + std::string(token) + "'";
    if (seen[k]) return "field " + std::string(keys[k]) + " given twice";
    seen[k] = true;
    value[k] = token.substr(eq + 1);
  }
  for (std::size_t k = 0; k < N; ++k) {
    if (!seen[k]) return "field " + std::string(keys[k]) + " missing";
  }
  return {};
}

enum { kMpi, kRanks, kNodes, kPerNode, kOversub, kLayoutFields };

// The five layout fields, already split; returns the reason when invalid.
std::string parse_layout(const std::string_view* value, Layout* out) {
  if (value[kMpi] != "ompi" && value[kMpi] != "mpich") return "mpi must be ompi or mpich";
  out->mpi = std::string(value[kMpi]);
  const auto ranks = parse_int(value[kRanks]);
  const auto nodes = parse_int(value[kNodes]);
  const auto per_node = parse_int(value[kPerNode]);
  if (!ranks || !nodes || !per_node || *ranks < 1 || *nodes < 1 || *per_node < 1 ||
      *ranks > INT32_MAX || *nodes > *ranks || *per_node > *ranks) {
    return "ranks, nodes and ranks_per_node must be counts with nodes, ranks_per_node <= ranks";
  }
  out->ranks = static_cast<int>(*ranks);
  out->nodes = static_cast<int>(*nodes);
  out->ranks_per_node = static_cast<int>(*per_node);
  if (value[kOversub] != "0" && value[kOversub] != "1") return "oversubscribed must be 0 or 1";
  out->oversubscribed = value[kOversub] == "1";
  return {};
}

std::string format_layout(const Layout& l) {
  return "mpi=" + l.mpi + " ranks=" + std::to_string(l.ranks) +
         " nodes=" + std::to_string(l.nodes) +
         " ranks_per_node=" + std::to_string(l.ranks_per_node) +
         " oversubscribed=" + (l.oversubscribed ? "1" : "0");
}

// Parses one decision line; returns the reason when it is not valid.
std::string parse_line(std::string_view line, FileEntry* out) {
  enum { kBytes = kLayoutFields, kPath, kFields };
  static constexpr std::string_view kKeys[kFields] = {"mpi", "ranks", "nodes", "ranks_per_node",
                                                      "oversubscribed", "bytes", "path"};
  std::string_view value[kFields];
  if (std::string why = split_fields(line, kKeys, value); !why.empty()) return why;
  if (std::string why = parse_layout(value, &out->layout); !why.empty()) return why;
  const auto bytes = parse_size(value[kBytes]);
  if (!bytes || *bytes == 0 || *bytes == config::kSizeInfinite || (*bytes & (*bytes - 1)) != 0) {
    return "bytes must be a power of two (the lower bound of a size class)";
  }
  out->size_class = size_class(*bytes);
  const auto path = concrete_route_from_string(value[kPath]);
  if (!path) return "path must be pmpi, line, copy, cma, hier, rdma or zcopy";
  out->path = *path;
  return {};
}

// The `made` header lines (core/tune/stamp.h) seen so far.
struct Header {
  enum { kBuild, kMpi, kHca, kLayout, kLines };
  static constexpr std::string_view kKeys[kLines] = {"build", "mpi", "hca", "layout"};
  bool seen[kLines] = {};
  Stamp stamp;

  // One line after "made "; returns the reason when it is not valid.
  std::string add(std::string_view rest) {
    const std::size_t space = rest.find_first_of(" \t");
    const std::string_view key = rest.substr(0, space);
    const std::string_view value =
        space == std::string_view::npos ? std::string_view() : trim(rest.substr(space));
    std::size_t k = 0;
    while (k < kLines && key != kKeys[k]) ++k;
    if (k == kLines) return "unknown header 'made " + std::string(key) + "'";
    if (seen[k]) return "header made " + std::string(key) + " given twice";
    if (value.empty()) return "header made " + std::string(key) + " without a value";
    seen[k] = true;
    if (k == kLayout) {
      static constexpr std::string_view kLayoutKeys[kLayoutFields] = {
          "mpi", "ranks", "nodes", "ranks_per_node", "oversubscribed"};
      std::string_view fields[kLayoutFields];
      if (std::string why = split_fields(value, kLayoutKeys, fields); !why.empty()) {
        return "made layout: " + why;
      }
      if (std::string why = parse_layout(fields, &stamp.layout); !why.empty()) {
        return "made layout: " + why;
      }
      return {};
    }
    (k == kBuild ? stamp.build : k == kMpi ? stamp.mpi : stamp.hca) = std::string(value);
    return {};
  }
  // All four lines or none; returns the reason otherwise.
  std::string finish(std::optional<Stamp>* out) const {
    const int count = seen[kBuild] + seen[kMpi] + seen[kHca] + seen[kLayout];
    if (count == 0) return {};
    for (int k = 0; k < kLines; ++k) {
      if (!seen[k]) return "header made " + std::string(kKeys[k]) + " missing (a stamp has all four)";
    }
    *out = stamp;
    return {};
  }
};

}  // namespace

std::optional<TuneFile> TuneFile::parse(std::string_view text, std::string* error) {
  TuneFile file;
  Header header;
  for (int number = 1; !text.empty(); ++number) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    if (line.starts_with("made ")) {
      if (const std::string why = header.add(trim(line.substr(5))); !why.empty()) {
        *error = "line " + std::to_string(number) + ": " + why;
        return std::nullopt;
      }
      continue;
    }
    FileEntry e;
    if (const std::string why = parse_line(line, &e); !why.empty()) {
      *error = "line " + std::to_string(number) + ": " + why;
      return std::nullopt;
    }
    file.set(e.layout, e.size_class, e.path);
  }
  if (const std::string why = header.finish(&file.stamp_); !why.empty()) {
    *error = why;
    return std::nullopt;
  }
  return file;
}

std::optional<TuneFile> TuneFile::load(const std::string& path, std::string* error) {
  std::string text;
  FileIdentity found;
  if (!read_regular_file(path, kMaxBytes, &text, &found, error)) return std::nullopt;
  std::string why;
  auto file = parse(text, &why);
  if (!file) {
    *error = path + ": " + why;
    return std::nullopt;
  }
  file->origin_ = Origin{path, found};
  return file;
}

bool TuneFile::save(const std::string& path, std::string* error) const {
  std::string text;
  FileIdentity now;
  if (!read_regular_file(path, kMaxBytes, &text, &now, error)) return false;
  if (origin_ && origin_->path == path && origin_->found != now) {
    *error = path + (origin_->found.exists ? ": was replaced or removed since it was read"
                                           : ": was created since it was found absent");
    return false;
  }
  std::string why;
  const auto current = parse(text, &why);
  if (!current) {
    *error = path + ": not a tune file, so not replaced (" + why + ")";
    return false;
  }
  if (*current == *this) return true;
  const std::string out = format();
  if (out.size() > kMaxBytes) {
    *error = path + ": " + std::to_string(entries_.size()) + " decisions take more than " +
             std::to_string(kMaxBytes) + " bytes, the limit of a tune file";
    return false;
  }
  return replace_regular_file(path, out, now, error);
}

std::string TuneFile::format() const {
  std::string out = "# mlxa2a tuning decisions (MLXA2A_TUNE_FILE); bytes = size class "
                    "[bytes, 2*bytes) per peer\n";
  if (stamp_) {
    out += "# made on (a job on anything else ignores this file, docs/tune.md):\n";
    out += "made build " + stamp_->build + "\nmade mpi " + stamp_->mpi + "\nmade hca " +
           stamp_->hca + "\nmade layout " + format_layout(stamp_->layout) + "\n";
  }
  for (const FileEntry& e : entries_) {
    out += format_layout(e.layout) + " bytes=" + config::format_size(std::uint64_t{1} << e.size_class) +
           " path=" + std::string(to_string(e.path)) + "\n";
  }
  return out;
}

std::optional<Route> TuneFile::lookup(const Layout& layout, unsigned cls) const {
  for (const FileEntry& e : entries_) {
    if (e.size_class == cls && e.layout == layout) return e.path;
  }
  return std::nullopt;
}

bool operator==(const TuneFile& a, const TuneFile& b) {
  return a.stamp_ == b.stamp_ && a.entries_.size() == b.entries_.size() &&
         std::all_of(a.entries_.begin(), a.entries_.end(), [&](const FileEntry& e) {
           return b.lookup(e.layout, e.size_class) == e.path;
         });
}

void TuneFile::set(const Layout& layout, unsigned cls, Route path) {
  for (FileEntry& e : entries_) {
    if (e.size_class == cls && e.layout == layout) {
      e.path = path;
      return;
    }
  }
  entries_.push_back({layout, cls, path});
}

}  // namespace mlxa2a::core::tune
