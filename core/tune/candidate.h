// The paths a tuned MPI_Alltoall call may take (docs/tune.md). Every candidate
// is a correct alltoall; they differ only in speed.
//
// Adding a path is one enumerator here, its name in candidate.cc,
// one line where core/mpi/tuning.cc lists a team's candidates, and its case
// where the engine (core/mpi/shm_engine.cc, hier_engine.cc) maps it to a path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mlxa2a::core::tuning {

enum class Candidate : std::uint8_t {
  pmpi,  // the MPI library's own alltoall
  line,  // single-node engine, line mode (core/shm/lines.h)
  copy,  // single-node engine, copy-in/copy-out through the slots
  cma,   // single-node engine, process_vm_readv from the peers' buffers
  hier,  // multi-node: shared-memory fan-in/fan-out, leaders over PMPI
  rdma,  // multi-node: the same, leaders write over RDMA (core/mlx5)
  zcopy,  // multi-node, RDMA: leaders' writes read the ranks' send buffers (docs/zerocopy.md)
};
inline constexpr std::size_t kCandidateKinds = 7;

std::string_view to_string(Candidate c);
std::optional<Candidate> candidate_from_string(std::string_view s);

// Size classes: class c holds the calls with bytes per peer in [2^c, 2^(c+1)).
// Calls of 0 bytes move nothing and are never tuned.
inline constexpr unsigned kSizeClasses = 64;
unsigned size_class(std::uint64_t bytes_per_peer);  // bytes_per_peer > 0

}  // namespace mlxa2a::core::tuning
