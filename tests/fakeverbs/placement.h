// fakeverbs: how the fake HCA's DMA places bytes, and what registration pins.
//
// Placement: a transfer is cut into pieces that never cross a 64-byte
// boundary of the peer's address space (a PCIe write of one cache line) and
// the pieces are moved in a random order drawn from the QP's stream (hca.h).
// So the last byte of a plain RDMA WRITE may land first, as on hardware
// (IB spec 9.5 o9-20: data placement within a message is not ordered; only
// the completion says the whole message is there).
//
// Pinning: ibv_reg_mr faults the pages in (as get_user_pages does) and
// records each page's /proc/self/pagemap entry in "<pid>.pin.<key>".  At
// execution, a page of an MR whose mapping changed since -- not present any
// more (munmap, madvise(DONTNEED), mremap away) or, where frame numbers are
// readable (root / CAP_SYS_ADMIN), backed by another frame (free + malloc,
// munmap + mmap) -- is "stale": on hardware the HCA still uses the pinned old
// page, so a write into it is lost to the application and a read from it
// sees old data.  The fake drops such writes, sends 0xdb bytes for such
// reads, counts both in the owner's MR table and logs them;
// FAKEVERBS_STALE=abort aborts the executing process instead.
// Without readable frame numbers only vanished pages are detected.
//
// Thread safety: functions are thread-safe; they block in system calls.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fakeverbs {

// Where a range of memory that an MR covers lives, for the staleness check.
struct PinnedRange {
  pid_t pid = 0;        // owner of the memory
  uint32_t key = 0;     // MR key: names the pin file
  uint64_t mr_addr = 0; // virtual address of the MR's first byte
};

// One side of a transfer: iovecs in the owner's address space, each with the
// MR that covers it (same size as iov; key 0 = not checked, e.g. inline data).
struct Side {
  std::vector<iovec> iov;
  std::vector<PinnedRange> pins;
};

struct PlaceStats {
  uint64_t stale_dst_bytes = 0;  // written into stale pages: lost
  uint64_t stale_src_bytes = 0;  // read from stale pages: old data (0xdb here)
};

// Moves the bytes of `src` to `dst`; exactly one of them is in another
// process `peer` (`write` true: dst is remote).  `rng` non-null shuffles the
// pieces.  False (errno set) if a system call failed.
bool place(pid_t peer, const Side& src, const Side& dst, bool write, uint64_t* rng,
           PlaceStats* stats);

// Registration: faults [addr, addr+len) in (for writing if `writable`) and
// records its pages.  False + errno (EFAULT) if the pages cannot be faulted in.
bool pin_pages(uint32_t key, void* addr, size_t len, bool writable);
void unpin_pages(uint32_t key);

// FAKEVERBS_STALE: false = count (default), true = abort.
bool stale_aborts();

}  // namespace fakeverbs
