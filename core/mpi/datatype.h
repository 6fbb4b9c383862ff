// Datatype helpers of the engine paths (core/mpi/engine_call.h): which
// predefined types are plain scalars, where a datatype's bytes lie, and
// packing/unpacking a call's blocks through a contiguous buffer.
//
// Contract
// * Local: no communication; PMPI type queries and PMPI_Pack/PMPI_Unpack
//   only. Never throws. Not tied to any engine.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace mlxa2a::core::mpi {

// The size of one element of a predefined datatype that is a single
// contiguous C scalar (MPI_BYTE, MPI_INT, MPI_DOUBLE, ...; not the pair types,
// which have padding); 0 for every other type. No MPI call: the common case
// of an alltoall needs no type query.
std::size_t predefined_scalar_size(MPI_Datatype type) noexcept;

// True for a predefined (named) datatype whose elements tile without gaps from
// offset 0 (MPI_INT, MPI_INTEGER, MPI_2INT; not MPI_DOUBLE_INT, which has
// padding): a buffer of such elements is one contiguous block, and the handle
// names the same type for the whole job (named types are never freed).
bool is_plain_named(MPI_Datatype type) noexcept;

// Where `count` elements of `type` for each of `peers` peers lie, as the
// engine needs them: block j of bytes_per_peer bytes at base + j * bytes.
struct Layout {
  bool contiguous = false;
  MPI_Aint offset = 0;  // of the first byte (true lower bound)
  MPI_Aint extent = 0;  // of one element (set when !contiguous)
};

// A type whose queries fail comes back not contiguous: PMPI_Pack then
// reports what is wrong.
Layout layout_of(MPI_Datatype type) noexcept;

// Packs peers blocks of count elements each (block j at base + j*count*extent)
// into out (block j at out + j*bytes). Per block, so every count must fit an
// int (bytes < 2^31). false if PMPI_Pack failed.
bool pack(const void* base, std::int64_t count, MPI_Datatype type, const Layout& l, int peers,
          std::uint64_t bytes, char* out, MPI_Comm comm) noexcept;
// The reverse of pack().
bool unpack(const char* in, std::uint64_t bytes, int peers, void* base, std::int64_t count,
            MPI_Datatype type, const Layout& l, MPI_Comm comm) noexcept;

}  // namespace mlxa2a::core::mpi
