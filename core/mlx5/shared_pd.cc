#include "core/mlx5/shared_pd.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/collective_setup.h"
#include "core/log.h"
#include "core/mlx5/fd_passing.h"
#include "core/mlx5/verbs_registrar.h"
#include "rcache/registrar.h"

namespace mlxa2a::mlx5 {

struct SharedPd::Hello {
  std::int32_t pid = 0;
  std::uint8_t can_import = 0;  // members: the import verbs are there
  std::uint8_t leader_ready = 0;
  std::uint8_t pad[2] = {};
  std::uint32_t pd_handle = 0;
  SocketName name;
};

namespace {

struct Outcome {
  std::int32_t status = 0;  // Status
  char why[180] = {};
};

// Step 3, the agreement: every member's outcome; the first failing member's
// (by rank), or bootstrap_failed when the allgather itself failed.
SetupOutcome first_failure(GroupBootstrap& node, const SetupOutcome& here) {
  Outcome mine;
  mine.status = static_cast<std::int32_t>(here.status);
  std::snprintf(mine.why, sizeof mine.why, "%s", here.why.c_str());
  std::vector<Outcome> all(static_cast<std::size_t>(node.size()));
  if (!node.allgather(&mine, all.data(), sizeof mine)) {
    return {Status::bootstrap_failed, "node bootstrap failed while agreeing on the shared PD"};
  }
  for (int r = 0; r < node.size(); ++r) {
    const Outcome& o = all[static_cast<std::size_t>(r)];
    if (o.status != 0) return {static_cast<Status>(o.status), "member " + std::to_string(r) + ": " + o.why};
  }
  return {};
}

bool has_import(const Verbs* v) {
  return v && v->import_device && v->import_pd && v->unimport_pd;
}

// Registers (and drops) one page on `pd`: the proof that this process can
// register its buffers on the shared PD.
bool probe(const Verbs& v, ibv_pd* pd, std::string* why) {
  const long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    *why = std::string("mmap for the registration probe: ") + std::strerror(errno);
    return false;
  }
  VerbsRegistrar reg(v, pd);
  rcache::MemoryKey key;
  const bool ok = reg.register_memory(mem, static_cast<std::size_t>(page),
                                      rcache::kLocalWrite | rcache::kRemoteRead, &key);
  if (ok) reg.deregister_memory(key);
  else *why = "ibv_reg_mr on the imported PD refused: " + reg.last_error();
  munmap(mem, static_cast<std::size_t>(page));
  return ok;
}

}  // namespace

SharedPd::~SharedPd() {
  if (dev_ || !v_) return;
  if (pd_) v_->unimport_pd(pd_);
  if (ctx_ && v_->close_device(ctx_) != 0) {
    MLXA2A_LOG(Warn, "ibv_close_device of the imported context failed; it is leaked");
  }
}

// Step 1's local half: what this member tells the node (its pid; the
// leader's socket and PD handle, or a member's import verbs).
SharedPd::Hello SharedPd::offer(const Verbs* v, const Device* dev, bool leader, FdServer& server,
                      CollectiveSetup& setup) {
  Hello mine;
  mine.pid = static_cast<std::int32_t>(getpid());
  std::string why;
  if (leader) {
    if (!v || !dev) {
      setup.fail(Status::unavailable, v ? "the leader has no device" : verbs_unavailable_reason());
    } else if (server.open(&mine.name, &why)) {
      mine.leader_ready = 1;
      mine.pd_handle = dev->pd()->handle;
    } else {
      setup.fail(Status::unavailable, why);
    }
    mine.can_import = 1;  // the leader imports nothing
  } else {
    mine.can_import = has_import(v) ? 1 : 0;
    if (!v) setup.fail(Status::unavailable, verbs_unavailable_reason());
    else if (!mine.can_import)
      setup.fail(Status::unavailable, "the verbs library lacks ibv_import_device/ibv_import_pd");
  }
  return mine;
}

// Step 2 on a member: the leader's command fd, then its device and PD, then
// (unless told not to) one registration on it.
void SharedPd::import(const Hello& lead, const SharedPdOptions& opt, CollectiveSetup& setup) {
  std::string why;
  UniqueFd fd;
  if (!receive_fd(lead.name, opt.timeout_ms, &fd, &why)) {
    setup.fail(Status::unavailable, why);
  } else if ((ctx_ = v_->import_device(fd.get())) == nullptr) {
    setup.fail(Status::unavailable, std::string("ibv_import_device: ") + std::strerror(errno));
  } else {
    fd.release();  // ibv_close_device closes it (man ibv_import_device)
    if ((pd_ = v_->import_pd(ctx_, lead.pd_handle)) == nullptr) {
      setup.fail(Status::unavailable, std::string("ibv_import_pd: ") + std::strerror(errno));
    } else if (opt.probe_registration && !probe(*v_, pd_, &why)) {
      setup.fail(Status::unavailable, why);
    }
  }
}

Status SharedPd::setup(const Verbs* v, GroupBootstrap& node, std::shared_ptr<Device> dev,
                       const SharedPdOptions& opt, std::unique_ptr<SharedPd>* out,
                       std::string* why) noexcept {
  try {
    const int n = node.size();
    const bool leader = node.rank() == opt.leader;
    std::unique_ptr<SharedPd> self(new SharedPd);
    self->v_ = v;
    CollectiveSetup setup;
    FdServer server;
    std::vector<Hello> all(static_cast<std::size_t>(n));
    const Hello mine = offer(v, dev.get(), leader, server, setup);
    if (!node.allgather(&mine, all.data(), sizeof mine)) {
      *why = "node bootstrap failed while sharing the PD";
      return Status::bootstrap_failed;
    }
    const Hello& lead = all[static_cast<std::size_t>(opt.leader)];
    bool go = lead.leader_ready != 0;
    std::vector<pid_t> ranks;
    for (int r = 0; r < n; ++r) {
      go = go && all[static_cast<std::size_t>(r)].can_import;
      if (r != opt.leader) ranks.push_back(all[static_cast<std::size_t>(r)].pid);
    }
    if (go && leader) {
      self->dev_ = dev;
      self->ctx_ = dev->context();
      self->pd_ = dev->pd();
      std::string local_why;
      if (!server.serve(dev->context()->cmd_fd, n - 1, ranks, opt.timeout_ms, &local_why)) {
        setup.fail(Status::unavailable, local_why);
      }
    } else if (go) {
      self->import(lead, opt, setup);
    }
    const SetupOutcome& agreed = setup.agree(
        [&](const SetupOutcome& here) { return first_failure(node, here); });
    if (!agreed.ok()) {
      *why = agreed.why;
      return agreed.status;
    }
    if (!go) {  // nobody failed locally, yet step 2 was skipped: cannot happen
      *why = "the leader did not share its PD";
      return Status::unavailable;
    }
    *out = std::move(self);
    return Status::ok;
  } catch (...) {
    *why = "out of memory while sharing the PD";
    return Status::unavailable;
  }
}

}  // namespace mlxa2a::mlx5
