#include "core/shm/pages.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mlxa2a::shm {

namespace {

std::string read_text(const char* path) {
  std::string out;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

// The number after "key:" in /proc/meminfo's text (0 when absent).
std::uint64_t meminfo_value(std::string_view text, std::string_view key) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key &&
        line[key.size()] == ':') {
      return std::strtoull(std::string(line.substr(key.size() + 1)).c_str(), nullptr, 10);
    }
    at = end + 1;
  }
  return 0;
}

}  // namespace

const char* pages_name(Pages p) noexcept {
  switch (p) {
    case Pages::hugetlb: return "hugetlb";
    case Pages::thp: return "thp";
    case Pages::normal: break;
  }
  return "4k";
}

PageFacts parse_page_facts(std::string_view meminfo, std::string_view shmem_enabled) noexcept try {
  PageFacts f;
  f.hugepage_bytes = meminfo_value(meminfo, "Hugepagesize") * 1024;  // kB
  f.hugepages_free = meminfo_value(meminfo, "HugePages_Free");
  // The selected setting is in brackets: "always within_size [advise] never deny force".
  const std::size_t open = shmem_enabled.find('['), close = shmem_enabled.find(']');
  if (open != std::string_view::npos && close > open) {
    const std::string_view sel = shmem_enabled.substr(open + 1, close - open - 1);
    f.shmem_thp = sel != "never" && sel != "deny";
  }
  return f;
} catch (...) {  // allocation only
  return {};
}

PageFacts read_page_facts() noexcept try {
  return parse_page_facts(read_text("/proc/meminfo"),
                          read_text("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
} catch (...) {
  return {};
}

Pages choose_pages(std::string_view mode, std::size_t bytes, const PageFacts& f) noexcept {
  if (mode == "hugetlb") return Pages::hugetlb;
  if (mode == "thp") return Pages::thp;
  if (mode != "auto") return Pages::normal;
  if (f.hugepage_bytes != 0) {
    const std::uint64_t need = (bytes + f.hugepage_bytes - 1) / f.hugepage_bytes;
    if (need <= f.hugepages_free) return Pages::hugetlb;
  }
  return f.shmem_thp ? Pages::thp : Pages::normal;
}

}  // namespace mlxa2a::shm
