// The engines of a team on one node: LocalEngine (one rank: the exchange is
// a copy) and ShmEngine (the shared-memory alltoall, core/shm/node_alltoall.h).
// Built only by make_engine (core/mpi/engine.h).
//
// Contract
// * ShmEngine::create is collective over the node communicator (which is the
//   team's communicator): first the engine pool when a pool key is given
//   (one PMPI_Allreduce, engine_pool.h), else a new segment. It fails on every
//   rank alike unless MPI itself broke; the team's agreement follows anyway.
// * ShmEngine owns its NodeAlltoall; its destructor hands a healthy one to the
//   pool under its key (engine_pool.h), else unmaps it. Local.
// * Everything else: as Engine and NodeAlltoall.
#pragma once

#include <memory>

#include "core/mpi/engine.h"
#include "core/shm/node_alltoall.h"

namespace mlxa2a::core::mpi {

class LocalEngine final : public Engine {
 public:
  shm::Status run(const char* send, char* recv, std::size_t bytes) noexcept override;
  shm::Status run(const char* send, char* recv, std::size_t bytes,
                  tuning::Candidate) noexcept override {
    return run(send, recv, bytes);
  }
  tuning::Candidate default_route(std::size_t) const noexcept override {
    return tuning::Candidate::copy;
  }
  void abandon() noexcept override {}
};

class ShmEngine final : public Engine {
 public:
  static std::unique_ptr<ShmEngine> create(const EngineRequest& req,
                                           const EngineSettings& s) noexcept;
  ~ShmEngine() override;

  shm::Status run(const char* send, char* recv, std::size_t bytes) noexcept override {
    return node_->run(send, recv, bytes);
  }
  shm::Status run(const char* send, char* recv, std::size_t bytes,
                  tuning::Candidate path) noexcept override;
  tuning::Candidate default_route(std::size_t bytes) const noexcept override;
  void abandon() noexcept override { node_->abandon(); }
  bool compares_sizes() const noexcept override { return true; }
  shm::Status check_sizes(std::size_t bytes) noexcept override {
    return node_->check_sizes(bytes);
  }
  bool resync(MPI_Comm comm) noexcept override;
  shm::NodeAlltoall* node_alltoall() const noexcept override { return node_.get(); }
  // Whether create() took the engine from the pool.
  bool reused() const noexcept override { return reused_; }

 private:
  ShmEngine(std::unique_ptr<shm::NodeAlltoall> node, EnginePool::Members key, bool reused)
      : node_(std::move(node)), pool_key_(std::move(key)), reused_(reused) {}
  std::unique_ptr<shm::NodeAlltoall> node_;
  EnginePool::Members pool_key_;  // where node_ goes when the team is gone (empty: nowhere)
  bool reused_;
};

}  // namespace mlxa2a::core::mpi
