#include "core/mpi/shm_path.h"

#include <cstring>

#include "core/log.h"

namespace mlxa2a::core::mpi {

namespace {

// Where `count` elements of `type` for each of `peers` peers lie, as the
// engine needs them: block j of bytes_per_peer bytes at base + j * bytes.
struct Layout {
  bool contiguous = false;
  MPI_Aint offset = 0;  // of the first byte (true lower bound)
  MPI_Aint extent = 0;  // of one element (set when !contiguous)
};

Layout layout_of(MPI_Datatype type) {
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

// Packs peers blocks of count elements each (block j at base + j*count*extent)
// into out (block j at out + j*bytes). Per block, so every count fits an int.
bool pack(const void* base, std::int64_t count, MPI_Datatype type, const Layout& l, int peers,
          std::uint64_t bytes, char* out, MPI_Comm comm) {
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
            MPI_Datatype type, const Layout& l, MPI_Comm comm) {
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

shm::Status run_engine(Team& team, const char* send, char* recv, std::uint64_t bytes,
                       EngineRoute route) {
  return route ? team.run(send, recv, bytes, *route) : team.run(send, recv, bytes);
}

int report(MPI_Comm comm, const char* what) {
  // The error handler may return (MPI_ERRORS_RETURN) or abort the job.
  // Every later call on a broken engine fails too: rate-limited.
  MLXA2A_LOG_LIMITED(Error, "MPI_Alltoall through shared memory failed: %s", what);
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

// The engine's status as the call's result. A size mismatch across ranks is
// the program's error (mismatched type signatures, MPI 4.0 section 6.9): every
// rank gets it in the same call, agrees on a restart point and reports
// MPI_ERR_TRUNCATE, what the MPI reports for a message longer than its
// receive buffer; the communicator stays usable.
int engine_result(const AlltoallArgs& a, Team& team, shm::Status st) {
  if (st == shm::Status::ok) return MPI_SUCCESS;
  if (st == shm::Status::size_mismatch) {
    if (!team.resync(a.comm)) return report(a.comm, "agreement after a size mismatch failed");
    MLXA2A_LOG_LIMITED(Info, "MPI_Alltoall: %s; MPI_ERR_TRUNCATE", shm::to_string(st));
    PMPI_Comm_call_errhandler(a.comm, MPI_ERR_TRUNCATE);
    return MPI_ERR_TRUNCATE;
  }
  return report(a.comm, shm::to_string(st));
}

}  // namespace

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

int shm_check_sizes(const AlltoallArgs& a, Team& team, std::uint64_t bytes) noexcept {
  return engine_result(a, team, team.check_sizes(bytes));
}

int shm_alltoall_contiguous(const AlltoallArgs& a, Team& team, std::uint64_t bytes,
                            EngineRoute route) noexcept {
  return engine_result(a, team,
                       run_engine(team, static_cast<const char*>(a.sendbuf),
                                  static_cast<char*>(a.recvbuf), bytes, route));
}

int shm_alltoall(const AlltoallArgs& a, Team& team, std::uint64_t bytes,
                 EngineRoute route) noexcept {
  // Nothing to move; but when the engine compares sizes across ranks, a 0-byte
  // call takes part, so that a peer called with more bytes is not left waiting.
  if (bytes == 0) {
    return team.compares_sizes() ? engine_result(a, team, team.run(nullptr, nullptr, 0))
                                     : MPI_SUCCESS;
  }
  const int n = team.size();
  // Peers may already wait in the engine for this call: a rank that cannot
  // prepare its buffers makes them fail too instead of leaving them waiting.
  auto give_up = [&](const char* why) {
    team.abandon();
    return report(a.comm, why);
  };
  const std::uint64_t total = bytes * static_cast<std::uint64_t>(n);
  const bool in_place = a.sendbuf == MPI_IN_PLACE;
  const Layout rl = layout_of(a.recvtype);
  const Layout sl = in_place || a.sendtype == a.recvtype ? rl : layout_of(a.sendtype);

  // A local failure (scratch allocation, packing) must not make this rank
  // skip the engine: its peers are already in it. It runs with whatever the
  // buffers hold and reports the error afterwards.
  const char* local_error = nullptr;
  char* recv = static_cast<char*>(a.recvbuf) + rl.offset;
  if (!rl.contiguous) {
    recv = team.scratch(1, total);
    if (!recv) return give_up("out of memory for the receive scratch buffer");
  }
  const char* send = static_cast<const char*>(a.sendbuf) + sl.offset;
  if (in_place || !sl.contiguous) {
    char* tmp = team.scratch(0, total);
    if (!tmp) return give_up("out of memory for the send scratch buffer");
    const void* src = in_place ? a.recvbuf : a.sendbuf;
    const std::int64_t count = in_place ? a.recvcount : a.sendcount;
    const MPI_Datatype type = in_place ? a.recvtype : a.sendtype;
    if (sl.contiguous) {
      std::memcpy(tmp, static_cast<const char*>(src) + sl.offset, total);
    } else if (!pack(src, count, type, sl, n, bytes, tmp, a.comm)) {
      local_error = "PMPI_Pack failed";
    }
    send = tmp;
  }

  if (const shm::Status st = run_engine(team, send, recv, bytes, route); st != shm::Status::ok) {
    return engine_result(a, team, st);
  }
  if (!rl.contiguous && !unpack(recv, bytes, n, a.recvbuf, a.recvcount, a.recvtype, rl, a.comm)) {
    local_error = "PMPI_Unpack failed";
  }
  return local_error ? report(a.comm, local_error) : MPI_SUCCESS;
}

}  // namespace mlxa2a::core::mpi
