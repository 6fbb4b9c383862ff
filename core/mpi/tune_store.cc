#include "core/mpi/tune_store.h"

#include <mpi.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <utility>

#include "core/log.h"
#include "core/mpi/build_info.h"
#include "core/tune/stamp.h"

namespace mlxa2a::core::mpi {

namespace {

constexpr std::uint8_t kNone = 0xff;
using Decisions = std::array<std::uint8_t, tune::kSizeClasses>;

struct Store {
  std::mutex mutex;
  tune::TuneFile loaded;   // lookups see the file as read at start only
  tune::TuneFile to_save;  // loaded (and where from) plus this run's decisions
  std::string path;        // what was read ("" : nothing)
  bool site = false;       // path is the site file: never written
  bool use_file = false;   // equal on every rank
  bool share = false;      // equal on every rank
  bool dropped = false;    // a stamp did not fit: neither used nor written
  bool stamp = false;      // MLXA2A_TUNE_STAMP: write this job's stamp
  int world_rank = -1;
  std::optional<tune::Stamp> here;  // this job's, once the layout is known
  std::map<std::pair<std::string, std::vector<int>>, Decisions> shared;
};
Store& store() {
  static Store s;  // leaked-on-exit semantics are fine: plain memory
  return s;
}

std::string layout_text(const tune::Layout& l) {
  return l.mpi + ' ' + std::to_string(l.ranks) + ' ' + std::to_string(l.nodes) + ' ' +
         std::to_string(l.ranks_per_node) + ' ' + (l.oversubscribed ? '1' : '0');
}

// This rank's stamp for world's layout: build line, MPI library, HCAs.
tune::Stamp stamp_here(const tune::Layout& world) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (PMPI_Get_library_version(version, &len) != MPI_SUCCESS) len = 0;
  return {tune::stamp_value(shim_build_info()),
          tune::stamp_value(std::string_view(version, static_cast<std::size_t>(len))),
          tune::hca_identity("/sys/class/infiniband"), world};
}

}  // namespace

std::string_view tune_family() noexcept {
#if defined(MLXA2A_FAMILY_OMPI)
  return "ompi";
#else
  return "mpich";
#endif
}

std::string site_tune_path(const config::Settings& s) {
  if (s.tune_site_dir.empty()) return {};
  return s.tune_site_dir + "/tune-" + std::string(tune_family()) + ".txt";
}

bool site_tune_file_present(const config::Settings& s) noexcept {
  try {
    const std::string path = site_tune_path(s);
    struct stat st {};
    return !path.empty() && s.tune_file.empty() && lstat(path.c_str(), &st) == 0 &&
           S_ISREG(st.st_mode);
  } catch (...) {
    return false;
  }
}

void open_tune_store(const config::Settings& s, bool any_site_file, bool share,
                     int world_rank) noexcept {
  Store& st = store();
  std::lock_guard lock(st.mutex);
  st.world_rank = world_rank;
  st.share = share;
  st.stamp = s.tune_stamp;
  st.use_file = !s.tune_file.empty() || any_site_file;
  try {
    st.site = s.tune_file.empty();
    st.path = st.site ? (site_tune_file_present(s) ? site_tune_path(s) : "") : s.tune_file;
    if (st.path.empty()) return;
    const char* what = st.site ? "site tune file" : "MLXA2A_TUNE_FILE";
    std::string error;
    auto file = tune::TuneFile::load(st.path, &error);
    if (!file) {
      // MLXA2A_TUNE_FILE: every rank says so, as before; the site file (the
      // same on every node, usually): world rank 0.
      if (!st.site || world_rank == 0) {
        MLXA2A_LOG(Warn, "%s ignored (trials run instead; it is not replaced): %s", what,
                   error.c_str());
      } else {
        MLXA2A_LOG(Debug, "%s ignored: %s", what, error.c_str());
      }
      return;
    }
    st.loaded = *file;
    st.to_save = std::move(*file);
  } catch (...) {
    MLXA2A_LOG(Warn, "tune file %s could not be read", st.path.c_str());
  }
}

tune::Layout layout_of(const Team::Origin& map) {
  const std::vector<int>& ids = map.node_ids;
  std::vector<int> members(ids.size(), 0);
  int nodes = 0;
  for (std::size_t r = 0; r < ids.size(); ++r) {
    nodes += ids[r] == static_cast<int>(r);
    if (ids[r] >= 0 && static_cast<std::size_t>(ids[r]) < ids.size()) ++members[ids[r]];
  }
  const int per_node = members.empty() ? 0 : *std::max_element(members.begin(), members.end());
  return {std::string(tune_family()), static_cast<int>(ids.size()), nodes, per_node,
          map.oversubscribed};
}

void check_tune_stamp(const Team::Origin* world) noexcept {
  Store& st = store();
  std::lock_guard lock(st.mutex);
  if (st.path.empty()) return;
  try {
    if (world) st.here = stamp_here(layout_of(*world));
    const auto& made = st.loaded.stamp();
    if (!made) return;
    const std::string why =
        st.here ? tune::stamp_mismatch(*made, *st.here) : "the job's layout is unknown";
    if (why.empty()) return;
    // Every rank drops it alike where the job differs (build, MPI, layout);
    // an HCA that differs on some nodes only is caught by the class's
    // agreement (every rank must hold the same decision).
    st.dropped = true;
    st.loaded = tune::TuneFile{};
    if (st.world_rank == 0) {
      MLXA2A_LOG(Warn, "tune file %s ignored, made on something else (trials run instead; it "
                       "is not replaced): %s", st.path.c_str(), why.c_str());
    } else {
      MLXA2A_LOG(Debug, "tune file %s ignored: %s", st.path.c_str(), why.c_str());
    }
  } catch (...) {
    st.dropped = true;
    st.loaded = tune::TuneFile{};
  }
}

void close_tune_store(const config::Settings& s) noexcept {
  Store& st = store();
  std::lock_guard lock(st.mutex);
  if (s.tune_file.empty() || st.dropped) return;
  try {
    if (st.here && (st.stamp || st.to_save.stamp())) st.to_save.set_stamp(*st.here);
    std::string error;
    if (!st.to_save.save(s.tune_file, &error)) {
      MLXA2A_LOG(Warn, "MLXA2A_TUNE_FILE not written (this run's decisions are not kept): %s",
                 error.c_str());
    }
  } catch (...) {
    MLXA2A_LOG(Warn, "MLXA2A_TUNE_FILE %s could not be written", s.tune_file.c_str());
  }
}

bool tune_store_uses_file() noexcept {
  std::lock_guard lock(store().mutex);
  return store().use_file;
}

bool tune_store_shares() noexcept {
  std::lock_guard lock(store().mutex);
  return store().share;
}

std::optional<Route> file_decision(const tune::Layout& layout, unsigned cls) noexcept {
  std::lock_guard lock(store().mutex);
  return store().loaded.lookup(layout, cls);
}

void note_decision(const tune::Layout& layout, const ShareKey* key, unsigned cls,
                   Route path) noexcept {
  Store& st = store();
  std::lock_guard lock(st.mutex);
  try {
    st.to_save.set(layout, cls, path);
    if (key && st.share) {
      auto [it, fresh] = st.shared.try_emplace({layout_text(key->layout), key->world_ranks});
      if (fresh) it->second.fill(kNone);
      it->second[cls] = static_cast<std::uint8_t>(path);
    }
  } catch (...) {
    // Allocation only: out of memory the job is lost anyway.
  }
}

std::optional<Route> shared_decision(const ShareKey& key, unsigned cls) noexcept {
  Store& st = store();
  std::lock_guard lock(st.mutex);
  try {
    const auto it = st.shared.find({layout_text(key.layout), key.world_ranks});
    if (it == st.shared.end() || it->second[cls] == kNone) return std::nullopt;
    return static_cast<Route>(it->second[cls]);
  } catch (...) {
    return std::nullopt;
  }
}

bool shared_decisions_exist() noexcept {
  std::lock_guard lock(store().mutex);
  return !store().shared.empty();
}

}  // namespace mlxa2a::core::mpi
