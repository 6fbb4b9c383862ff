// a2a_fuzz.h: the pieces of a2a_fuzz (tests/mpi/a2a_fuzz.cc) that know no
// communicator: a seeded generator, the byte formula, and the datatype table
// with each type's byte layout written out by hand, so that the checks never
// ask the MPI where a type's bytes are.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fuzz {

// splitmix64: the same seed gives the same sequence on every rank.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }
};

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return Rng(a * 0xD6E8FEB86659FD93ull ^ b).next(); }

// The byte `src` sends to `dst` at signature byte k of step `step`.
struct Formula {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t key(int src, int dst) const {
    return mix(mix(seed, step), (static_cast<std::uint64_t>(src) << 32) | static_cast<unsigned>(dst));
  }
  static unsigned char at(std::uint64_t key, std::size_t k) {
    return static_cast<unsigned char>((key + k * 0x9E3779B97F4A7C15ull) >> 56);
  }
};

enum Base { kByte, kInt, kDouble, kBases };
inline std::size_t base_size(Base b) { return b == kByte ? 1 : b == kInt ? 4 : 8; }

// One datatype: its handle, base type, base elements per element, extent,
// and where each element's bytes lie (offsets from the element's start, in
// type-map order; negative for a negative lower bound).
struct Run {
  std::ptrdiff_t off;
  std::size_t len;
};
struct Layout {
  std::string name;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  Base base = kByte;
  std::size_t basics = 1;
  std::ptrdiff_t extent = 1;
  std::vector<Run> runs;
  bool owned = false;  // derived: freed at the end
  std::ptrdiff_t lo() const {
    std::ptrdiff_t m = runs[0].off;
    for (const Run& r : runs) m = r.off < m ? r.off : m;
    return m;
  }
  std::ptrdiff_t hi() const {
    std::ptrdiff_t m = 0;
    for (const Run& r : runs) m = r.off + static_cast<std::ptrdiff_t>(r.len) > m ? r.off + static_cast<std::ptrdiff_t>(r.len) : m;
    return m;
  }
  // Bytes from the lowest to the highest byte `elems` elements touch.
  std::size_t span(std::size_t elems) const {
    return elems ? static_cast<std::size_t>((elems - 1) * extent + hi() - lo()) : 0;
  }
  // Calls f(offset from the buffer pointer, signature byte index within the
  // block) for every byte of block `block` of `count` elements.
  template <class F>
  void each(std::size_t count, std::size_t block, F&& f) const {
    std::size_t k = 0;
    for (std::size_t e = block * count; e < (block + 1) * count; ++e) {
      const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(e) * extent;
      for (const Run& r : runs)
        for (std::size_t i = 0; i < r.len; ++i) f(at + r.off + static_cast<std::ptrdiff_t>(i), k++);
    }
  }
};

inline Layout named(const char* name, MPI_Datatype t, Base b, std::size_t n, std::ptrdiff_t extent) {
  return Layout{name, t, b, n, extent, {{0, n * base_size(b)}}, false};
}

inline Layout derived(const char* name, MPI_Datatype t, Base b, std::size_t basics, std::ptrdiff_t extent,
                      std::vector<Run> runs) {
  MPI_Type_commit(&t);
  return Layout{name, t, b, basics, extent, std::move(runs), true};
}

// Every send/receive pair of one base has the same signature per base
// element, so any two layouts of one base may meet (counts chosen so).
inline std::vector<Layout> make_layouts() {
  std::vector<Layout> t;
  t.push_back(named("byte", MPI_BYTE, kByte, 1, 1));
  MPI_Datatype v;
  MPI_Type_vector(3, 1, 2, MPI_BYTE, &v);  // x.x.x: odd extent
  t.push_back(derived("bvec3s2", v, kByte, 3, 5, {{0, 1}, {2, 1}, {4, 1}}));
  MPI_Type_contiguous(7, MPI_BYTE, &v);
  t.push_back(derived("bcontig7", v, kByte, 7, 7, {{0, 7}}));
  t.push_back(named("int", MPI_INT, kInt, 1, 4));
  t.push_back(named("2int", MPI_2INT, kInt, 2, 8));
  MPI_Type_contiguous(3, MPI_INT, &v);
  t.push_back(derived("icontig3", v, kInt, 3, 12, {{0, 12}}));
  MPI_Type_vector(2, 1, 2, MPI_INT, &v);  // x.x, extent 12
  t.push_back(derived("ivec2gap", v, kInt, 2, 12, {{0, 4}, {8, 4}}));
  MPI_Datatype inner;
  MPI_Type_vector(2, 1, 2, MPI_INT, &inner);
  MPI_Type_create_resized(inner, 0, 16, &v);  // x.x. : trailing gap
  MPI_Type_free(&inner);
  t.push_back(derived("ivec2pad16", v, kInt, 2, 16, {{0, 4}, {8, 4}}));
  const int one_block = 2;
  const MPI_Aint at8 = 8;
  MPI_Type_create_hindexed(1, &one_block, &at8, MPI_INT, &inner);
  MPI_Type_create_resized(inner, 4, 16, &v);  // lb 4, data at 8..16 of each 16
  MPI_Type_free(&inner);
  t.push_back(derived("ilb4", v, kInt, 2, 16, {{8, 8}}));
  MPI_Type_create_resized(MPI_INT, -4, 8, &v);  // negative lb
  t.push_back(derived("ineglb", v, kInt, 1, 8, {{0, 4}}));
  const int lens[2] = {1, 1}, displs[2] = {2, 0};
  MPI_Type_indexed(2, lens, displs, MPI_INT, &v);  // second int first
  t.push_back(derived("iswap", v, kInt, 2, 12, {{8, 4}, {0, 4}}));
  t.push_back(named("double", MPI_DOUBLE, kDouble, 1, 8));
  MPI_Type_vector(2, 1, 3, MPI_DOUBLE, &v);
  t.push_back(derived("dvec2s3", v, kDouble, 2, 32, {{0, 8}, {24, 8}}));
  return t;
}

inline void free_layouts(std::vector<Layout>& t) {
  for (Layout& l : t)
    if (l.owned) MPI_Type_free(&l.type);
}

}  // namespace fuzz
