#include "core/tune/stamp.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/config/parse.h"

namespace mlxa2a::core::tune {

namespace {

std::string describe(const Layout& l) {
  return std::to_string(l.nodes) + " nodes, " + std::to_string(l.ranks_per_node) +
         " ranks per node, " + std::to_string(l.ranks) + " ranks, " + l.mpi +
         (l.oversubscribed ? ", oversubscribed" : "");
}

}  // namespace

std::string stamp_mismatch(const Stamp& made, const Stamp& here) {
  auto differs = [](const char* what, const std::string& a, const std::string& b) {
    return std::string(what) + ": made with '" + a + "', this job has '" + b + "'";
  };
  if (made.build != here.build) return differs("build", made.build, here.build);
  if (made.mpi != here.mpi) return differs("MPI", made.mpi, here.mpi);
  if (made.hca != here.hca) return differs("HCA", made.hca, here.hca);
  if (made.layout != here.layout) {
    return differs("layout", describe(made.layout), describe(here.layout));
  }
  return {};
}

std::string stamp_value(std::string_view text) {
  constexpr std::size_t kMax = 256;
  std::string out;
  bool space = false;
  for (const char c : text) {
    if (c == '\n' || c == '\r') break;  // the first line only
    if (c == ' ' || c == '\t' || c == '#' || static_cast<unsigned char>(c) < 0x20) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
    if (out.size() >= kMax) break;
  }
  return out.empty() ? "unknown" : out;
}

std::string hca_identity(const std::string& sysfs_root) {
  std::vector<std::string> names;
  if (DIR* d = opendir(sysfs_root.c_str())) {
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) {
    std::string fw;
    std::ifstream in(sysfs_root + "/" + name + "/fw_ver");
    if (!std::getline(in, fw)) fw = "unknown";
    out += (out.empty() ? "" : "; ") + name + " fw " + std::string(config::trim(fw));
  }
  return out.empty() ? "none" : stamp_value(out);
}

}  // namespace mlxa2a::core::tune
