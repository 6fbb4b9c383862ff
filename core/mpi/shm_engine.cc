#include "core/mpi/shm_engine.h"

#include <array>
#include <cstring>
#include <new>

#include "core/log.h"
#include "core/mpi/group_bootstrap.h"

namespace mlxa2a::core::mpi {

Status LocalEngine::run(const char* send, char* recv, std::size_t bytes) noexcept {
  if (bytes != 0) std::memcpy(recv, send, bytes);
  return Status::ok;
}

std::unique_ptr<ShmEngine> ShmEngine::create(const EngineRequest& req,
                                             const EngineSettings& s) noexcept {
  Status st = Status::create_failed;
  std::unique_ptr<shm::NodeAlltoall> node;
  try {
    const shm::Options opt = shm_options(s.shm, req.comm, req.oversubscribed);
    MpiBootstrap boot(req.node_comm, req.local_rank, req.local_size);
    st = shm::NodeAlltoall::create(boot, opt, node);
    if (st == Status::ok) return std::unique_ptr<ShmEngine>(new ShmEngine(std::move(node)));
  } catch (...) {  // allocation only
  }
  MLXA2A_LOG_LIMITED(Warn, "shared-memory set-up failed (%s); this communicator uses PMPI",
                     to_string(st));
  return nullptr;
}

ShmEngine::ShmEngine(std::unique_ptr<shm::NodeAlltoall> node) : node_(std::move(node)) {
  props_.kind = EngineProps::Kind::node;
  props_.line_max = node_->local_size() > 1 ? node_->line_max() : 0;
  props_.cma_usable = node_->cma_usable();
  props_.cma_enabled = node_->cma_enabled();
  abilities_ = {this, nullptr, this};
}

Status ShmEngine::run(const char* send, char* recv, std::size_t bytes,
                           Route path) noexcept {
  switch (path) {
    case Route::line: return node_->run(send, recv, bytes, shm::Path::line);
    case Route::copy: return node_->run(send, recv, bytes, shm::Path::copy);
    case Route::cma: return node_->run(send, recv, bytes, shm::Path::cma);
    default: return run(send, recv, bytes);
  }
}

Route ShmEngine::default_route(std::size_t bytes) const noexcept {
  switch (node_->path_for(bytes)) {
    case shm::Path::line: return Route::line;
    case shm::Path::cma: return Route::cma;
    default: return Route::copy;
  }
}

bool ShmEngine::resync(MPI_Comm comm) noexcept {
  std::array<std::uint64_t, 2> point = node_->sync_point();
  if (PMPI_Allreduce(MPI_IN_PLACE, point.data(), 2, MPI_UINT64_T, MPI_MAX, comm) != MPI_SUCCESS) {
    node_->abandon();
    return false;
  }
  node_->resync(point);
  return true;
}

}  // namespace mlxa2a::core::mpi
