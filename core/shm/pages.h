// What pages back a node's staging segment (MLXA2A_NET_HUGEPAGES): huge
// pages cut the HCA's translation entries for a registered stage by 512.
//
// Contract
// * hugetlb: a MFD_HUGETLB memfd, pages reserved at mmap (a shortage fails
//   there, not as SIGBUS later); peers attach through /proc/<creator
//   pid>/fd/<fd> (same uid; the creator keeps the fd until all attached).
//   thp: the /dev/shm segment with MADV_HUGEPAGE before its first faults.
// * choose_pages() is pure; "auto" takes hugetlb only when enough huge pages
//   are free, else thp when shmem THP is not "never"/"deny".
// * Creation falls back (hugetlb -> thp -> normal): a stage is never refused
//   for its pages (segment.h); thp only where shmem THP allows it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mlxa2a::shm {

enum class Pages : std::uint8_t { normal, thp, hugetlb };
const char* pages_name(Pages p) noexcept;  // "4k", "thp", "hugetlb"

struct PageFacts {
  std::size_t hugepage_bytes = 0;  // the default huge page size (0: none configured)
  std::uint64_t hugepages_free = 0;
  bool shmem_thp = false;  // /sys/kernel/mm/transparent_hugepage/shmem_enabled allows advice
};
PageFacts read_page_facts() noexcept;
// Facts from the text of /proc/meminfo and of shmem_enabled (tests).
PageFacts parse_page_facts(std::string_view meminfo, std::string_view shmem_enabled) noexcept;

// mode: "auto", "hugetlb", "thp", "off" (anything else: off).
Pages choose_pages(std::string_view mode, std::size_t bytes, const PageFacts& f) noexcept;

}  // namespace mlxa2a::shm
