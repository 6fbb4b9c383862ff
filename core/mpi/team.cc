#include "core/mpi/team.h"

#include <mutex>
#include <new>

#include "core/log.h"
#include "core/mpi/topology.h"

namespace mlxa2a::core::mpi {

namespace {

// The shm Bootstrap over a node communicator: PMPI collectives, set-up only.
class MpiBootstrap final : public shm::Bootstrap {
 public:
  MpiBootstrap(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  bool broadcast(void* buf, std::size_t len, int root) override {
    // Set-up messages are a few hundred bytes; never near INT_MAX.
    return PMPI_Bcast(buf, static_cast<int>(len), MPI_BYTE, root, comm_) == MPI_SUCCESS;
  }
  bool barrier() override { return PMPI_Barrier(comm_) == MPI_SUCCESS; }

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
};

// Segments are unlinked as soon as every rank attached, so leftovers exist
// only if a job died inside that window; one sweep per process is plenty.
void remove_stale_segments_once(const std::string& prefix) {
  static std::once_flag once;
  std::call_once(once, [&] {
    const int removed = shm::remove_stale_segments(prefix);
    if (removed > 0) MLXA2A_LOG(Info, "removed %d stale shared-memory segment(s)", removed);
  });
}

// While a rank waits in the shm engine it makes no MPI call, yet a peer may
// need this rank's MPI progress to reach the alltoall (e.g. it waits in
// MPI_Recv for a rendezvous message this rank MPI_Isend'ed before the
// alltoall — a correct MPI program). The waiter calls this about once per
// millisecond while yielding; PMPI_Iprobe drives the MPI library's progress
// engine without receiving anything.
bool drive_mpi_progress(MPI_Comm comm) {
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
  return false;
}

}  // namespace

Team::~Team() = default;

char* Team::scratch(int which, std::size_t bytes) noexcept {
  Buffer& b = scratch_[which];
  if (b.size < bytes) {
    b.data.reset(new (std::nothrow) char[bytes]);
    b.size = b.data ? bytes : 0;
  }
  return b.data.get();
}

std::unique_ptr<Team> Team::create(MPI_Comm comm, const config::Settings& settings) noexcept {
  std::unique_ptr<Team> team(new (std::nothrow) Team);
  if (!team) return nullptr;
  PMPI_Comm_size(comm, &team->size_);
  if (team->size_ == 1) {
    team->caps_ = Capabilities{.shm = true, .rdma = false, .nodes = 1};
    return team;
  }
  // [0]: node count (one leader per node), [1]: ranks whose set-up failed.
  long long agree[2] = {0, 1};
  try {
    NodeComm node;
    if (node_of_comm(comm, settings.node_layout, &node)) {
      agree[0] = node.local_rank == 0 ? 1 : 0;
      agree[1] = 0;
    }
    team->oversubscribed_ = node.oversubscribed;
    // local_size == size is true on every rank or on none, so all ranks of a
    // single-node team build the engine and no rank of a multi-node one does.
    if (agree[1] == 0 && node.local_size == team->size_) {
      shm::Options opt;
      opt.oversubscribed = node.oversubscribed;
      opt.abort_requested = [comm] { return drive_mpi_progress(comm); };
      if (node.local_rank == 0) remove_stale_segments_once(opt.name_prefix);
      MpiBootstrap boot(node.comm.get(), node.local_rank, node.local_size);
      const shm::Status st = shm::NodeAlltoall::create(boot, opt, team->shm_);
      if (st != shm::Status::ok) {
        MLXA2A_LOG(Warn, "shared-memory set-up failed (%s); this communicator uses PMPI",
                   shm::to_string(st));
        agree[1] = 1;
      }
    }
  } catch (...) {
    // Only allocation throws here (std::function); this rank reports failure
    // and still takes part in the agreement below.
    agree[1] = 1;
  }
  // The node communicator is gone (NodeComm's scope): teams keep none.
  if (PMPI_Allreduce(MPI_IN_PLACE, agree, 2, MPI_LONG_LONG, MPI_SUM, comm) != MPI_SUCCESS) {
    agree[1] = 1;  // this rank cannot know; an MPI error here is fatal in practice
  }
  team->caps_.nodes = static_cast<int>(agree[0]);
  team->caps_.shm = agree[0] == 1 && agree[1] == 0;
  if (!team->caps_.shm) team->shm_.reset();
  return team;
}

}  // namespace mlxa2a::core::mpi
