// MPI datatypes that send or receive a leader's hier::Header (24 bytes) and the
// first piece of its data as ONE message (docs/hier-transports.md, "Header inside the
// data message"): two blocks at absolute addresses (used with MPI_BOTTOM),
// the header's and the data's, which lie apart in the staging areas.
//
// Why a cache: the same (header, data, length) triples come back every call
// of a size (two parities, one per partner and direction), and committing a
// type costs more than the message saves; a miss builds and commits one.
//
// Contract
// * get() returns a committed type of signature sizeof(hier::Header) + len MPI_BYTEs, header
//   first, or MPI_DATATYPE_NULL when MPI refused (the caller then fails the
//   exchange). The type stays valid until the cache is cleared: at most
//   kMax entries are kept, and a full cache frees them all first (a type
//   freed while a request using it is pending stays usable by that request,
//   MPI 4.0 section 5.1.5).
// * Not thread-safe (one per transport). Destruction frees the types, except
//   after MPI_Finalize (abandon()).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace mlxa2a::core::mpi {

class HeadedTypes {
 public:
  static constexpr std::size_t kMax = 64;
  HeadedTypes() = default;
  ~HeadedTypes() { clear(); }
  HeadedTypes(const HeadedTypes&) = delete;
  HeadedTypes& operator=(const HeadedTypes&) = delete;

  MPI_Datatype get(const void* head, const void* data, std::size_t len) noexcept;
  void clear() noexcept;
  void abandon() noexcept { entries_.clear(); }
  std::size_t size() const noexcept { return entries_.size(); }

 private:
  struct Entry {
    const void* head;
    const void* data;
    std::size_t len;
    MPI_Datatype type;
  };
  std::vector<Entry> entries_;
};

}  // namespace mlxa2a::core::mpi
