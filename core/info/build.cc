#include "core/info/build.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/version/version.h"

namespace mlxa2a::core::info {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> built_families() {
  std::vector<std::string> out;
  std::istringstream in(version::kFamilies);
  for (std::string word; in >> word;) out.push_back(word.substr(0, word.find('=')));
  return out;
}

std::string family_mpi_version(const std::string& family) {
  std::istringstream in(version::kFamilies);
  for (std::string word; in >> word;) {
    if (word.rfind(family + "=", 0) == 0) return word.substr(family.size() + 1);
  }
  return "?";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// One line per family: "<family>: <path> (<build line>)" or "not found".
std::vector<std::string> shim_lines(const std::string& exe_dir) {
  std::vector<std::string> lines;
  for (const ShimReport& s : find_shims(exe_dir)) {
    std::string line = "shim " + s.family + ": ";
    if (s.path.empty()) {
      line += "not found (searched: " + join(s.searched, ", ") + ")";
    } else {
      line += s.path + "\n    " + (s.build_line.empty() ? "(no mlxa2a build line)" : s.build_line);
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace

std::string own_directory() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::vector<std::string> shim_search_dirs(const std::string& exe_dir) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("MLXA2A_LIBDIR")) {
    std::istringstream in(env);
    for (std::string d; std::getline(in, d, ':');) {
      if (!d.empty()) dirs.push_back(d);
    }
  }
  if (!exe_dir.empty()) {
    const fs::path rel(version::kLibdirFromBindir);
    dirs.push_back((rel.is_absolute() ? rel : (fs::path(exe_dir) / rel).lexically_normal()).string());
    dirs.push_back((fs::path(exe_dir).parent_path() / "shim").string());
  }
  return dirs;
}

std::vector<ShimReport> find_shims(const std::string& exe_dir) {
  std::vector<ShimReport> out;
  const std::vector<std::string> dirs = shim_search_dirs(exe_dir);
  for (const std::string& family : built_families()) {
    ShimReport r{family, "", "", dirs};
    for (const std::string& d : dirs) {
      const fs::path p = fs::path(d) / ("libmlxa2a-" + family + ".so");
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) {
        r.path = fs::weakly_canonical(p, ec).string();
        r.build_line = embedded_build_line(r.path);
        break;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string embedded_build_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = std::string(version::kWhatMarker) + "mlxa2a ";
  const std::size_t at = bytes.find(key);
  if (at == std::string::npos) return "";
  const std::size_t begin = at + std::strlen(version::kWhatMarker);
  const std::size_t end = bytes.find('\0', begin);
  return bytes.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::string render_version(const std::string& exe_dir) {
  std::string out = std::string(version::kVersionLine) + "\n";
  out += std::string("build: ") + version::kBuildLine + "\n";
  std::vector<std::string> fams;
  for (const std::string& f : built_families()) fams.push_back(f + " (" + family_mpi_version(f) + ")");
  out += "MPI families built: " + join(fams, ", ") + "\n";
  for (const std::string& l : shim_lines(exe_dir)) out += l + "\n";
  return out;
}

std::string render_build_comment(const std::string& exe_dir) {
  std::string out = std::string("# ") + version::kVersionLine + "; " + version::kBuildLine + "\n";
  for (const std::string& l : shim_lines(exe_dir)) {
    std::string commented = "# " + l;
    for (std::size_t p = commented.find('\n'); p != std::string::npos;
         p = commented.find('\n', p + 1)) {
      commented.insert(p + 1, "# ");
    }
    out += commented + "\n";
  }
  return out;
}

}  // namespace mlxa2a::core::info
