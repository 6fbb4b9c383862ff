// One protection domain shared by the processes of a node: the leader's
// opened device and PD, imported by the node's other ranks
// (ibv_import_device / ibv_import_pd, rdma-core >= 32), so that each rank
// registers its own buffers on the leader's PD (verbs_registrar.h) and the
// leader's work requests can read them with the ranks' lkeys (issue 15).
//
// Set-up (SharedPd::setup, collective over the node's GroupBootstrap):
//   1. allgather: every member's pid and whether it can import (its verbs
//      library has the import verbs); the leader adds its PD handle and the
//      name of an abstract Unix socket it listens on (fd_passing.h).
//   2. if the leader is ready and every member can import: the leader sends
//      its context's command fd to each rank (SCM_RIGHTS, members' pids only);
//      each rank imports the device, then the PD, and (unless told not to)
//      probes a registration of one page on it.
//   3. allgather: each member's outcome. The result is the same on every
//      member: ok, or unavailable with the first failing member's reason
//      (the caller keeps the staged path and traces it), or bootstrap_failed.
// Every member runs both allgathers whatever happens locally (CollectiveSetup,
// core/collective_setup.h: step 3 is its agreement).
//
// Contract
// * Blocking, set-up only, one thread; every wait bounded by timeout_ms.
// * The leader's SharedPd holds a reference to its Device (the PD's owner);
//   a rank's owns the imported context and PD and releases them in reverse
//   (ibv_unimport_pd, then ibv_close_device, which closes the received fd).
//   Every registration on the PD must be gone before the SharedPd.
// * The importing process's MRs live as long as their registrations; the
//   leader must outlive every WR that reads them (the caller's protocol).
#pragma once

#include <memory>
#include <string>

#include "core/bootstrap.h"
#include "core/mlx5/resources.h"
#include "core/mlx5/verbs.h"
#include "core/status.h"

namespace mlxa2a {
class CollectiveSetup;
}

namespace mlxa2a::mlx5 {

class FdServer;

struct SharedPdOptions {
  int leader = 0;             // the node group's member that owns the device
  int timeout_ms = 20000;     // each wait (connect, fd hand-over)
  // Register one page on the imported PD to prove ranks can (a kernel or
  // provider may import the PD yet refuse registrations on it).
  bool probe_registration = true;
};

class SharedPd {
 public:
  // `v` may be null on a member whose verbs library is missing (it then
  // reports unavailable and still takes part). On the leader `dev` is the
  // opened device whose PD is shared; ignored elsewhere.
  static Status setup(const Verbs* v, GroupBootstrap& node, std::shared_ptr<Device> dev,
                      const SharedPdOptions& opt, std::unique_ptr<SharedPd>* out,
                      std::string* why) noexcept;
  ~SharedPd();
  SharedPd(const SharedPd&) = delete;
  SharedPd& operator=(const SharedPd&) = delete;

  ibv_pd* pd() const { return pd_; }
  ibv_context* context() const { return ctx_; }
  bool imported() const { return dev_ == nullptr; }

 private:
  SharedPd() = default;
  struct Hello;  // step 1's message
  static Hello offer(const Verbs* v, const Device* dev, bool leader, FdServer& server,
                     CollectiveSetup& setup);
  void import(const Hello& lead, const SharedPdOptions& opt, CollectiveSetup& setup);
  const Verbs* v_ = nullptr;
  std::shared_ptr<Device> dev_;  // leader: the owner
  ibv_context* ctx_ = nullptr;   // rank: imported (owned) / leader: dev_'s
  ibv_pd* pd_ = nullptr;         // rank: imported (owned) / leader: dev_'s
};

}  // namespace mlxa2a::mlx5
