// Setup-time communication among the ranks of one node, never on the hot
// path. Every local rank calls the same sequence of broadcast()/barrier(),
// like the MPI collectives they model; false: failed on this rank (the
// caller gives up: Status::bootstrap_failed). Implementations: core/mpi
// (PMPI on the node communicator), tests/shm (fork + shared memory).
#pragma once

#include <cstddef>

namespace mlxa2a::shm {

struct Bootstrap {
  virtual ~Bootstrap() = default;
  virtual int local_rank() const = 0;   // 0 .. local_size()-1
  virtual int local_size() const = 0;   // ranks on this node, >= 1
  // Copies len bytes from root's buf into every other rank's buf.
  virtual bool broadcast(void* buf, std::size_t len, int root) = 0;
  virtual bool barrier() = 0;
};

}  // namespace mlxa2a::shm
