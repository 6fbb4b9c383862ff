#include "core/mlx5/shared_pd.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "core/mlx5/fd_passing.h"
#include "core/mlx5/verbs_registrar.h"
#include "rcache/registrar.h"

namespace mlxa2a::mlx5 {

namespace {

struct Hello {
  std::int32_t pid = 0;
  std::uint8_t can_import = 0;  // members: the import verbs are there
  std::uint8_t leader_ready = 0;
  std::uint8_t pad[2] = {};
  std::uint32_t pd_handle = 0;
  SocketName name;
};

struct Outcome {
  std::int32_t status = 0;  // Status
  char why[180] = {};
};

void copy_why(Outcome* o, Status s, const std::string& why) {
  o->status = static_cast<std::int32_t>(s);
  std::snprintf(o->why, sizeof o->why, "%s", why.c_str());
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

Status SharedPd::setup(const Verbs* v, GroupBootstrap& node, std::shared_ptr<Device> dev,
                       const SharedPdOptions& opt, std::unique_ptr<SharedPd>* out,
                       std::string* why) noexcept {
  try {
    const int n = node.size();
    const bool leader = node.rank() == opt.leader;
    std::unique_ptr<SharedPd> self(new SharedPd);
    self->v_ = v;
    FdServer server;
    Hello mine;
    mine.pid = static_cast<std::int32_t>(getpid());
    Outcome result;
    std::string local_why;
    if (leader) {
      if (!v || !dev) {
        copy_why(&result, Status::unavailable, v ? "the leader has no device" : verbs_unavailable_reason());
      } else if (server.open(&mine.name, &local_why)) {
        mine.leader_ready = 1;
        mine.pd_handle = dev->pd()->handle;
      } else {
        copy_why(&result, Status::unavailable, local_why);
      }
      mine.can_import = 1;  // the leader imports nothing
    } else {
      mine.can_import = has_import(v) ? 1 : 0;
      if (!v) copy_why(&result, Status::unavailable, verbs_unavailable_reason());
      else if (!mine.can_import)
        copy_why(&result, Status::unavailable, "the verbs library lacks ibv_import_device/ibv_import_pd");
    }
    std::vector<Hello> all(static_cast<std::size_t>(n));
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
      if (!server.serve(dev->context()->cmd_fd, n - 1, ranks, opt.timeout_ms, &local_why)) {
        copy_why(&result, Status::unavailable, local_why);
      }
    } else if (go) {
      UniqueFd fd;
      if (!receive_fd(lead.name, opt.timeout_ms, &fd, &local_why)) {
        copy_why(&result, Status::unavailable, local_why);
      } else if ((self->ctx_ = v->import_device(fd.get())) == nullptr) {
        copy_why(&result, Status::unavailable,
                 std::string("ibv_import_device: ") + std::strerror(errno));
      } else {
        fd.release();  // ibv_close_device closes it (man ibv_import_device)
        if ((self->pd_ = v->import_pd(self->ctx_, lead.pd_handle)) == nullptr) {
          copy_why(&result, Status::unavailable,
                   std::string("ibv_import_pd: ") + std::strerror(errno));
        } else if (opt.probe_registration && !probe(*v, self->pd_, &local_why)) {
          copy_why(&result, Status::unavailable, local_why);
        }
      }
    }
    std::vector<Outcome> outcomes(static_cast<std::size_t>(n));
    if (!node.allgather(&result, outcomes.data(), sizeof result)) {
      *why = "node bootstrap failed while agreeing on the shared PD";
      return Status::bootstrap_failed;
    }
    for (int r = 0; r < n; ++r) {
      const Outcome& o = outcomes[static_cast<std::size_t>(r)];
      if (o.status != 0) {
        *why = "member " + std::to_string(r) + ": " + o.why;
        return static_cast<Status>(o.status);
      }
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
