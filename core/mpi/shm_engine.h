// The engines of a team on one node: LocalEngine (one rank: the exchange is
// a copy) and ShmEngine (the shared-memory alltoall, core/shm/node_alltoall.h).
// Built only by make_engine (core/mpi/engine.h).
//
// Contract
// * ShmEngine::create is collective over the node communicator (which is the
//   team's communicator): a new segment. It fails on every rank alike unless
//   MPI itself broke; the team's agreement follows anyway.
// * ShmEngine owns its NodeAlltoall; the whole engine may outlive its team in
//   the pool (core/mpi/engine_pool.h: pool_id() is the segment's id,
//   poolable() its health). Destruction unmaps the segment. Local.
// * Everything else: as Engine and NodeAlltoall.
#pragma once

#include <memory>

#include "core/mpi/engine.h"
#include "core/shm/node_alltoall.h"

namespace mlxa2a::core::mpi {

class LocalEngine final : public Engine {
 public:
  Status run(const char* send, char* recv, std::size_t bytes) noexcept override;
  Status run(const char* send, char* recv, std::size_t bytes,
                  Route) noexcept override {
    return run(send, recv, bytes);
  }
  Route default_route(std::size_t) const noexcept override {
    return Route::copy;
  }
  void abandon() noexcept override {}
};

class ShmEngine final : public Engine, public SizeAgreement, public EnginePooling {
 public:
  static std::unique_ptr<ShmEngine> create(const EngineRequest& req,
                                           const EngineSettings& s) noexcept;

  Status run(const char* send, char* recv, std::size_t bytes) noexcept override {
    return node_->run(send, recv, bytes);
  }
  Status run(const char* send, char* recv, std::size_t bytes,
                  Route path) noexcept override;
  Route default_route(std::size_t bytes) const noexcept override;
  void abandon() noexcept override { node_->abandon(); }
  Status check_sizes(std::size_t bytes) noexcept override {
    return node_->check_sizes(bytes);
  }
  bool resync(MPI_Comm comm) noexcept override;
  std::uint64_t pool_id() const noexcept override { return node_->id(); }
  bool poolable() const noexcept override {
    return node_->healthy() && node_->local_size() >= 2;
  }
  void rebind(const shm::Options& opt) noexcept override { node_->rebind(opt); }

 private:
  explicit ShmEngine(std::unique_ptr<shm::NodeAlltoall> node);
  std::unique_ptr<shm::NodeAlltoall> node_;
};

}  // namespace mlxa2a::core::mpi
