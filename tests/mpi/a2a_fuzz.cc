// a2a_fuzz: seeded differential fuzzing of MPI_Alltoall. Every rank derives
// the same sequence of steps from --seed, so the program stays a correct MPI
// program; each step picks
//   * a communicator from a small live set (MPI_COMM_WORLD, duplicates,
//     splits with random colours and shuffled keys, MPI_Comm_create and
//     MPI_Comm_create_group with a shuffled group), now and then freeing one
//     and making another (handles and arenas get reused);
//   * a base type and bytes per peer (0 .. --max-bytes, log-uniform, plus
//     exact boundaries: line-mode limits, the CMA threshold, slot sizes and
//     the switches' values found in the environment), MPI_IN_PLACE sometimes,
//     MPI_Alltoall_c sometimes (MPI 4), the previous step's call again
//     sometimes (the dispatcher's repeat path);
// and each rank picks on its own the send and receive datatypes (any two of
// one base: contiguous, vectors with gaps, resized with lb != 0, a negative
// lb, reordered blocks: same signature, other layouts) and the buffers'
// offsets in one page-aligned arena per communicator (odd offsets too).
// Every received byte is checked against a formula of (seed, step, sender,
// receiver, byte index), every other byte of the receive arena must keep its
// guard value, and the send arena must be unchanged. A mismatch is described
// on stderr (step, communicator, types, counts, offsets, first bad byte) and
// counted; the run goes on. A2A_FUZZ_VERBOSE=1: rank 0 prints every step.
// Prints CALLS <rank> <n> and RESULT PASS|FAIL (tests/mpi/run_mpi_test.py).
//   a2a_fuzz --seed S --calls N [--max-bytes B]
#include "a2a_fuzz.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using fuzz::Layout;
using fuzz::Rng;

constexpr unsigned char kRecvGuard = 0x5A;
constexpr unsigned char kSendGuard = 0xC3;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kMaxOffset = 2 * kPage;
constexpr int kSlots = 5;

int g_calls = 0, g_failures = 0, g_world_rank = 0, g_world_size = 0;
bool g_verbose = false;
std::uint64_t g_seed = 1;
std::size_t g_max_bytes = 256 * 1024;
std::vector<Layout> g_layouts;

struct Arena {
  unsigned char* base = nullptr;
  std::size_t bytes = 0;
  void map(std::size_t n) {
    bytes = (n + kPage - 1) & ~(kPage - 1);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base = static_cast<unsigned char*>(p);
  }
  void unmap() {
    if (base) munmap(base, bytes);
    base = nullptr;
  }
};

// One live communicator (MPI_COMM_NULL on ranks outside it) and its arenas.
struct Slot {
  MPI_Comm comm = MPI_COMM_NULL;
  std::string desc;
  int rank = 0, size = 0;
  Arena send, recv;
  bool live = false;
};

// What one rank calls with at one step.
struct Call {
  int base = 0;
  std::size_t elems = 0;  // base elements per peer
  bool in_place = false, large = false;
  const Layout* st = nullptr;
  const Layout* rt = nullptr;
  std::size_t soff = 0, roff = 0;
};

void attach(Slot& s, MPI_Comm c, std::string desc) {
  s.comm = c;
  s.desc = std::move(desc);
  s.live = true;
  if (c == MPI_COMM_NULL) return;
  MPI_Comm_rank(c, &s.rank);
  MPI_Comm_size(c, &s.size);
  const std::size_t n = 2 * g_max_bytes * s.size + kMaxOffset + 2 * kPage;
  s.send.map(n);
  s.recv.map(n);
}

void release(Slot& s) {
  if (s.comm != MPI_COMM_NULL && s.comm != MPI_COMM_WORLD) MPI_Comm_free(&s.comm);
  s.send.unmap();
  s.recv.unmap();
  s.comm = MPI_COMM_NULL;
  s.live = false;
}

// A new communicator from the shared sequence: every rank makes the same
// draws; ranks outside the new communicator hold MPI_COMM_NULL.
void create(std::vector<Slot>& slots, int into, Rng& g, int step) {
  std::vector<int> live;
  for (int i = 0; i < kSlots; ++i)
    if (slots[i].live && i != into) live.push_back(i);
  const Slot& parent = slots[live[g.below(live.size())]];
  const int kind = static_cast<int>(g.below(4));
  const std::uint64_t salt = g.next();
  const int colours = 1 + static_cast<int>(g.below(3));
  MPI_Comm out = MPI_COMM_NULL;
  char desc[160];
  if (kind == 0 || kind == 1) {
    if (parent.comm != MPI_COMM_NULL) {
      if (kind == 0) {
        MPI_Comm_dup(parent.comm, &out);
      } else {
        int colour = static_cast<int>(fuzz::mix(salt, g_world_rank) % colours);
        if (colours == 3 && fuzz::mix(salt, 99) % g_world_size == static_cast<unsigned>(g_world_rank))
          colour = MPI_UNDEFINED;
        const int key = static_cast<int>(fuzz::mix(salt + 1, g_world_rank) % 4);
        MPI_Comm_split(parent.comm, colour, key, &out);
      }
    }
    std::snprintf(desc, sizeof desc, "%s of [%s] (step %d)", kind ? "split" : "dup",
                  parent.desc.c_str(), step);
  } else {
    // A shuffled, non-empty subset of MPI_COMM_WORLD.
    std::vector<int> ranks;
    for (int r = 0; r < g_world_size; ++r)
      if (g.chance(70)) ranks.push_back(r);
    if (ranks.empty()) ranks.push_back(static_cast<int>(salt % g_world_size));
    for (std::size_t i = ranks.size(); i > 1; --i) std::swap(ranks[i - 1], ranks[g.below(i)]);
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, static_cast<int>(ranks.size()), ranks.data(), &group);
    bool member = false;
    for (int r : ranks) member |= r == g_world_rank;
    if (kind == 2) {
      MPI_Comm_create(MPI_COMM_WORLD, group, &out);
    } else if (member) {
      MPI_Comm_create_group(MPI_COMM_WORLD, group, step, &out);
    }
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    std::string list;
    for (int r : ranks) list += std::to_string(r) + " ";
    std::snprintf(desc, sizeof desc, "%s {%s} (step %d)", kind == 2 ? "create" : "create_group",
                  list.c_str(), step);
  }
  attach(slots[into], out, desc);
}

void churn(std::vector<Slot>& slots, Rng& g, int step) {
  const int j = 1 + static_cast<int>(g.below(kSlots - 1));
  if (slots[j].live) {
    release(slots[j]);
    if (!g.chance(70)) return;
  }
  create(slots, j, g, step);
}

std::size_t pick_bytes(Rng& g) {
  static std::vector<std::size_t> edges;
  if (edges.empty()) {
    edges = {1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 56, 57, 63, 64, 65, 112, 113, 127, 128, 255, 256, 257,
             511, 512, 1024, 2047, 2048, 2049, 4095, 4096, 4097, 8192, 16383, 16384, 16385, 65535,
             65536, 65537, 131071, 131072, 131073, 262144};
    for (const char* name : {"MLXA2A_SHM_SLOT_SIZE", "MLXA2A_SHM_CMA_THRESHOLD",
                             "MLXA2A_NET_ZCOPY_THRESHOLD", "MLXA2A_NET_PMPI_SLOT_SIZE"}) {
      const char* v = std::getenv(name);
      if (!v) continue;
      char* end = nullptr;
      std::size_t x = std::strtoull(v, &end, 10);
      if (*end == 'K' || *end == 'k') x <<= 10;
      if (*end == 'M' || *end == 'm') x <<= 20;
      if (x == 0) continue;
      for (std::size_t d = 1; d <= 4; ++d)
        for (std::size_t e : {x / d - 1, x / d, x / d + 1}) edges.push_back(e);
    }
  }
  const std::uint64_t how = g.below(100);
  std::size_t b;
  if (how < 5) {
    b = 0;
  } else if (how < 35) {
    b = edges[g.below(edges.size())];
  } else {
    const double u = static_cast<double>(g.below(1u << 30)) / (1u << 30);
    b = static_cast<std::size_t>(std::exp(u * std::log(static_cast<double>(g_max_bytes) + 1.0)));
  }
  return b > g_max_bytes ? g_max_bytes : b;
}

// This rank's own choice of a layout of `base` whose element divides `elems`.
const Layout* pick_layout(Rng& l, int base, std::size_t elems) {
  std::vector<const Layout*> fit;
  for (const Layout& x : g_layouts)
    if (x.base == base && (elems % x.basics) == 0) fit.push_back(&x);
  return fit[l.below(fit.size())];
}

std::size_t pick_offset(Rng& l) {
  switch (l.below(4)) {
    case 0: return 0;
    case 1: return l.below(64);
    default: return l.below(kMaxOffset);
  }
}

unsigned char* buffer(Arena& a, const Layout& t, std::size_t off) {
  return a.base + kPage + off - t.lo();
}

// Fills the send data (or, in place, the receive buffer's) and the guards.
void prepare(Slot& s, const Call& c, const fuzz::Formula& f) {
  std::memset(s.send.base, kSendGuard, s.send.bytes);
  std::memset(s.recv.base, kRecvGuard, s.recv.bytes);
  const Layout& t = c.in_place ? *c.rt : *c.st;
  unsigned char* p = c.in_place ? buffer(s.recv, t, c.roff) : buffer(s.send, t, c.soff);
  const std::size_t count = c.elems / t.basics;
  for (int peer = 0; peer < s.size; ++peer) {
    const std::uint64_t key = f.key(s.rank, peer);
    t.each(count, peer, [&](std::ptrdiff_t at, std::size_t k) { p[at] = fuzz::Formula::at(key, k); });
  }
}

void report(const Slot& s, const Call& c, int step, const char* what, long at, int got, int want) {
  if (g_failures++ >= 20) return;
  std::fprintf(stderr,
               "a2a_fuzz: seed %llu step %d rank %d (world %d) comm [%s] size %d: %s: base %d "
               "bytes/peer %zu send %s recv %s in_place %d large %d soff %zu roff %zu: arena "
               "byte %ld got 0x%02x want 0x%02x (-1: no byte)\n",
               static_cast<unsigned long long>(g_seed), step, s.rank, g_world_rank, s.desc.c_str(),
               s.size, what, c.base, c.elems * fuzz::base_size(fuzz::Base(c.base)),
               c.in_place ? "-" : c.st->name.c_str(), c.rt->name.c_str(), c.in_place, c.large,
               c.soff, c.roff, at, got, want);
}

// Checks the received bytes and that every other byte kept its guard value.
void verify(Slot& s, const Call& c, const fuzz::Formula& f, int step, int rc) {
  if (rc != MPI_SUCCESS) {
    int cls = 0;
    MPI_Error_class(rc, &cls);
    report(s, c, step, ("error class " + std::to_string(cls)).c_str(), -1, 0, 0);
  }
  const std::size_t count = c.elems / c.rt->basics;
  unsigned char* r = buffer(s.recv, *c.rt, c.roff);
  bool bad = false;
  for (int peer = 0; peer < s.size && !bad; ++peer) {
    const std::uint64_t key = f.key(peer, s.rank);
    c.rt->each(count, peer, [&](std::ptrdiff_t at, std::size_t k) {
      const unsigned char want = fuzz::Formula::at(key, k);
      if (!bad && r[at] != want) {
        report(s, c, step, ("data from peer " + std::to_string(peer)).c_str(), r + at - s.recv.base,
               r[at], want);
        bad = true;
      }
      r[at] = kRecvGuard;
    });
  }
  for (std::size_t i = 0; i < s.recv.bytes; ++i)
    if (s.recv.base[i] != kRecvGuard) {
      if (!bad) report(s, c, step, "receive guard", static_cast<long>(i), s.recv.base[i], kRecvGuard);
      break;
    }
  if (c.in_place) return;
  unsigned char* p = buffer(s.send, *c.st, c.soff);
  for (int peer = 0; peer < s.size; ++peer) {
    const std::uint64_t key = f.key(s.rank, peer);
    c.st->each(c.elems / c.st->basics, peer, [&](std::ptrdiff_t at, std::size_t k) {
      if (p[at] != fuzz::Formula::at(key, k)) {
        report(s, c, step, "send data changed", p + at - s.send.base, p[at], fuzz::Formula::at(key, k));
      }
      p[at] = kSendGuard;
    });
  }
  for (std::size_t i = 0; i < s.send.bytes; ++i)
    if (s.send.base[i] != kSendGuard) {
      report(s, c, step, "send guard", static_cast<long>(i), s.send.base[i], kSendGuard);
      break;
    }
}

int alltoall(Slot& s, const Call& c) {
  ++g_calls;
  const std::size_t rc_count = c.elems / c.rt->basics;
  const std::size_t sc_count = c.in_place ? 0 : c.elems / c.st->basics;
  void* rbuf = buffer(s.recv, *c.rt, c.roff);
  const void* sbuf = c.in_place ? MPI_IN_PLACE : buffer(s.send, *c.st, c.soff);
  const MPI_Datatype st = c.in_place ? MPI_DATATYPE_NULL : c.st->type;
#if MPI_VERSION >= 4
  if (c.large)
    return MPI_Alltoall_c(sbuf, static_cast<MPI_Count>(sc_count), st, rbuf,
                          static_cast<MPI_Count>(rc_count), c.rt->type, s.comm);
#endif
  return MPI_Alltoall(sbuf, static_cast<int>(sc_count), st, rbuf, static_cast<int>(rc_count),
                      c.rt->type, s.comm);
}

void run(int calls) {
  std::vector<Slot> slots(kSlots);
  attach(slots[0], MPI_COMM_WORLD, "MPI_COMM_WORLD");
  Rng g(g_seed);
  std::vector<Call> last(kSlots);
  int prev_slot = -1;
  for (int step = 0; step < calls; ++step) {
    if (g.chance(8)) churn(slots, g, step);
    const bool again = prev_slot >= 0 && slots[prev_slot].live && g.chance(25);
    std::vector<int> live;
    for (int i = 0; i < kSlots; ++i)
      if (slots[i].live) live.push_back(i);
    const int si = again ? prev_slot : live[g.below(live.size())];
    Slot& s = slots[si];
    Rng l(fuzz::mix(fuzz::mix(g_seed, step), 1000 + g_world_rank));  // this rank's own choices
    Call c = last[si];
    if (!again) {
      c.base = static_cast<int>(g.below(fuzz::kBases));
      c.elems = pick_bytes(g) / fuzz::base_size(fuzz::Base(c.base));
      c.in_place = g.chance(15);
      c.large = MPI_VERSION >= 4 && g.chance(10);
      c.st = pick_layout(l, c.base, c.elems);
      c.rt = pick_layout(l, c.base, c.elems);
    }
    if (!again || l.chance(50)) {
      c.soff = pick_offset(l);
      c.roff = pick_offset(l);
    }
    last[si] = c;
    prev_slot = si;
    const fuzz::Formula f{g_seed, static_cast<std::uint64_t>(step)};
    if (g_verbose && g_world_rank == 0)
      std::fprintf(stderr, "a2a_fuzz: step %d comm [%s] base %d elems %zu in_place %d large %d%s\n",
                   step, s.desc.c_str(), c.base, c.elems, c.in_place, c.large, again ? " again" : "");
    if (s.comm == MPI_COMM_NULL) continue;
    if (g_verbose)
      std::fprintf(stderr, "a2a_fuzz: step %d world rank %d: send %s recv %s soff %zu roff %zu\n",
                   step, g_world_rank, c.in_place ? "-" : c.st->name.c_str(), c.rt->name.c_str(),
                   c.soff, c.roff);
    prepare(s, c, f);
    verify(s, c, f, step, alltoall(s, c));
  }
  for (int i = kSlots - 1; i >= 0; --i) release(slots[i]);
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seed")) g_seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-bytes")) g_max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: a2a_fuzz --seed S --calls N [--max-bytes B]\n");
      return 2;
    }
  }
  g_verbose = std::getenv("A2A_FUZZ_VERBOSE") && std::getenv("A2A_FUZZ_VERBOSE")[0] == '1';
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
  g_layouts = fuzz::make_layouts();
  run(calls);
  fuzz::free_layouts(g_layouts);
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", g_world_rank, g_calls);
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_world_rank == 0) std::printf("RESULT %s\n", failures ? "FAIL" : "PASS");
  std::fflush(stdout);
  MPI_Finalize();
  return failures ? 1 : 0;
}
