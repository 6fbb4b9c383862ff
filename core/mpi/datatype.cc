#include "core/mpi/datatype.h"

namespace mlxa2a::core::mpi {

std::size_t predefined_scalar_size(MPI_Datatype t) noexcept {
  // Three type queries cost more than a small shm alltoall's handoff. Built
  // once: Open MPI's handles are addresses, loaded through the GOT.
  struct Known {
    MPI_Datatype type;
    std::size_t size;
  };
  static const Known kTypes[] = {  // most common first
      {MPI_BYTE, 1},
      {MPI_INT, sizeof(int)},
      {MPI_DOUBLE, sizeof(double)},
      {MPI_CHAR, sizeof(char)},
      {MPI_FLOAT, sizeof(float)},
      {MPI_LONG, sizeof(long)},
      {MPI_LONG_LONG, sizeof(long long)},
      {MPI_UNSIGNED_CHAR, 1},
      {MPI_UNSIGNED, sizeof(unsigned)},
      {MPI_UNSIGNED_LONG, sizeof(unsigned long)},
      {MPI_INT8_T, 1},
      {MPI_UINT8_T, 1},
      {MPI_INT32_T, 4},
      {MPI_UINT32_T, 4},
      {MPI_INT64_T, 8},
      {MPI_UINT64_T, 8}};
  for (const Known& k : kTypes) {
    if (t == k.type) return k.size;
  }
  return 0;
}

bool is_plain_named(MPI_Datatype type) noexcept {
  if (predefined_scalar_size(type) != 0) return true;
  int integers = 0, addresses = 0, types = 0, combiner = MPI_UNDEFINED;
  if (PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) != MPI_SUCCESS ||
      combiner != MPI_COMBINER_NAMED) {
    return false;
  }
  const Layout l = layout_of(type);
  return l.contiguous && l.offset == 0;
}

Layout layout_of(MPI_Datatype type) noexcept {
  Layout l;
  if (predefined_scalar_size(type) != 0) {
    l.contiguous = true;  // extent is only needed for packing
    return l;
  }
  MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS ||
      PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent) != MPI_SUCCESS) {
    return l;  // not contiguous: PMPI_Pack will report what is wrong
  }
  l.extent = static_cast<MPI_Aint>(extent);
  // Elements tile without gaps when one element is exactly its size wide and
  // holds no hole (true extent == size); the bytes then start at true_lb.
  l.contiguous = size == extent && size == true_extent && lb == true_lb;
  l.offset = static_cast<MPI_Aint>(true_lb);
  return l;
}

bool pack(const void* base, std::int64_t count, MPI_Datatype type, const Layout& l, int peers,
          std::uint64_t bytes, char* out, MPI_Comm comm) noexcept {
  const auto* b = static_cast<const char*>(base);
  for (int j = 0; j < peers; ++j) {
    int pos = 0;
    if (PMPI_Pack(b + static_cast<MPI_Aint>(j) * count * l.extent, static_cast<int>(count), type,
                  out + j * bytes, static_cast<int>(bytes), &pos, comm) != MPI_SUCCESS) {
      return false;
    }
  }
  return true;
}

bool unpack(const char* in, std::uint64_t bytes, int peers, void* base, std::int64_t count,
            MPI_Datatype type, const Layout& l, MPI_Comm comm) noexcept {
  auto* b = static_cast<char*>(base);
  for (int j = 0; j < peers; ++j) {
    int pos = 0;
    if (PMPI_Unpack(in + j * bytes, static_cast<int>(bytes), &pos,
                    b + static_cast<MPI_Aint>(j) * count * l.extent, static_cast<int>(count), type,
                    comm) != MPI_SUCCESS) {
      return false;
    }
  }
  return true;
}

}  // namespace mlxa2a::core::mpi
