#include "core/mpi/engine.h"

#include <string>

#include "core/config/switches.h"
#include "core/log.h"
#include "core/mpi/hier_engine.h"
#include "core/mpi/shm_engine.h"
#include "core/rcache_options.h"

namespace mlxa2a::core::mpi {

EngineSettings EngineSettings::from(const config::Settings& s) {
  EngineSettings e;
  e.shm = s.shm;
  e.leaders = s.leaders;
  e.net = s.net;
  // The error is set only if the switch table and rcache disagree, which a
  // unit test rules out; the defaults then stand.
  std::string error;
  e.rcache = rcache_options(s.rcache, &error);
  return e;
}


bool drive_mpi_progress(MPI_Comm comm) noexcept {
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
  return false;
}

shm::Options shm_options(const config::ShmSwitches& s, MPI_Comm comm, bool oversubscribed) {
  shm::Options opt = shm::options_from(s);
  opt.oversubscribed = oversubscribed;
  opt.abort_requested = [comm] { return drive_mpi_progress(comm); };
  return opt;
}

std::unique_ptr<Engine> make_engine(const EngineRequest& req, const EngineSettings& s) noexcept {
  if (req.size == 1) return std::unique_ptr<Engine>(new (std::nothrow) LocalEngine);
  if (req.nodes == 1) return ShmEngine::create(req, s);
  if (req.node_ids == nullptr) return nullptr;  // a caller's bug: no node map
  return HierEngine::create(req, s);
}

}  // namespace mlxa2a::core::mpi
