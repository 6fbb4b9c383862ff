// Containment: after the leaders' RDMA exchange failed a call, the team stops
// running its engine; every later call the selection sends to the engine is
// served through PMPI instead, switched at the same call on every rank of the
// communicator (docs/hier.md "Containment").
//
// Contract
// * arm() is collective over the team's communicator (one PMPI_Comm_dup: the
//   agreement's private communicator, so the agreement never matches a
//   collective of the user's). HierEngine calls it once its leaders agreed on
//   RDMA, with MLXA2A_NET_TIMEOUT (timeout_ms), which bounds every wait below.
// * fail(call) on a rank whose engine call number `call` failed or was
//   abandoned (engine calls are numbered alike on every rank): posts one
//   PMPI_Iallreduce(MAX) of {call, -call} and returns at once, so the rank
//   may go on with other MPI calls. Later calls fail nothing twice.
// * substitute(call), on a rank where engaged(), for every later call the
//   selection routes to the engine (numbered on): the first one waits until
//   every rank has failed (the agreement completes). Every rank fails the
//   same call in the normal case (docs/hier.md, "Errors"); a rank whose call
//   succeeded although a partner's failed fails its next engine call (that
//   partner's leader no longer writes, so it times out) and joins then.
//   Returns fail for a call number some rank failed (this rank must fail it
//   too: its peers did), pmpi after it. A rank whose peers do not join within
//   4 x MLXA2A_NET_TIMEOUT aborts the job (PMPI_Abort) with an error: waiting
//   longer would hang it, going on alone would pair its calls wrongly.
// * Selection itself never changes (calls routed to PMPI stay PMPI, tuning
//   state stays equal on every rank); only the engine is replaced.
// * Destruction (communicator freed) waits up to 2 x MLXA2A_NET_TIMEOUT for a
//   pending agreement (a communicator must not be freed under a pending
//   collective), then leaves the duplicate allocated.
// * Not thread-safe: used only by calls on the team's communicator.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "core/mpi/topology.h"

namespace mlxa2a::core::mpi {

class Containment {
 public:
  enum class Outcome { pmpi, fail };

  Containment() = default;
  ~Containment();
  Containment(const Containment&) = delete;
  Containment& operator=(const Containment&) = delete;

  // false if the duplicate could not be made (then the team must not use RDMA).
  [[nodiscard]] bool arm(MPI_Comm comm, std::uint32_t timeout_ms) noexcept;
  bool armed() const noexcept { return comm_.get() != MPI_COMM_NULL; }
  void fail(std::uint64_t call, const char* what) noexcept;
  bool engaged() const noexcept { return phase_ != Phase::idle; }
  [[nodiscard]] Outcome substitute(std::uint64_t call) noexcept;
  // What failed and when, for traces; set once the agreement completed.
  const std::string& why() const noexcept { return why_; }

 private:
  enum class Phase { idle, pending, agreed };
  void agree() noexcept;
  // Tests request_ until it completes (true) or limit passes or MPI fails.
  bool wait(std::chrono::milliseconds limit) noexcept;

  OwnedComm comm_;
  std::uint32_t timeout_ms_ = 0;  // MLXA2A_NET_TIMEOUT, from arm()
  Phase phase_ = Phase::idle;
  MPI_Request request_ = MPI_REQUEST_NULL;
  long long mine_[2] = {0, 0};
  long long all_[2] = {0, 0};
  std::uint64_t failed_ = 0;  // this rank's failed call
  std::uint64_t last_ = 0;    // the latest call some rank failed
  std::string what_;
  std::string why_;
};

}  // namespace mlxa2a::core::mpi
