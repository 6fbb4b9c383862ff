#include "core/mpi/headed_types.h"

#include "core/hier/transport.h"

namespace mlxa2a::core::mpi {

MPI_Datatype HeadedTypes::get(const void* head, const void* data, std::size_t len) noexcept {
  for (const Entry& e : entries_) {
    if (e.head == head && e.data == data && e.len == len) return e.type;
  }
  if (entries_.size() >= kMax) clear();
  MPI_Aint at[2] = {0, 0};
  if (PMPI_Get_address(head, &at[0]) != MPI_SUCCESS ||
      PMPI_Get_address(data, &at[1]) != MPI_SUCCESS) {
    return MPI_DATATYPE_NULL;
  }
  const int lens[2] = {static_cast<int>(sizeof(hier::Header)), static_cast<int>(len)};
  MPI_Datatype t = MPI_DATATYPE_NULL;
  if (PMPI_Type_create_hindexed(2, lens, at, MPI_BYTE, &t) != MPI_SUCCESS) {
    return MPI_DATATYPE_NULL;
  }
  if (PMPI_Type_commit(&t) != MPI_SUCCESS) {
    PMPI_Type_free(&t);
    return MPI_DATATYPE_NULL;
  }
  try {
    entries_.push_back(Entry{head, data, len, t});
  } catch (...) {  // no room to keep it: free it at once (pending uses stay valid)
    PMPI_Type_free(&t);
    return MPI_DATATYPE_NULL;
  }
  return t;
}

void HeadedTypes::clear() noexcept {
  for (Entry& e : entries_) PMPI_Type_free(&e.type);
  entries_.clear();
}

}  // namespace mlxa2a::core::mpi
