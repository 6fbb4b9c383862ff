// fakeverbs: sharing one protection domain among processes -- the
// ibv_import_device / ibv_import_pd / ibv_import_mr family (man
// ibv_import_device, ibv_import_pd, ibv_import_mr).
//
// A context's cmd_fd is a file naming its process and device (device.cc).
// Another process that receives the descriptor (over a Unix socket,
// SCM_RIGHTS) imports the device from it, then the PD and MRs by handle.
// The imported PD's MRs stay in the owner's MR table and memory: a QP the
// importer creates on that PD reads and writes the owner's memory through
// their keys, and peers writing to that QP reach the owner's memory -- what a
// shared PD on one HCA does.  The owner keeps the objects: only it can
// deregister or deallocate them; importers release theirs with
// ibv_unimport_*.  An importer may register its own memory on the shared PD
// (pd_mr.cc): the MR goes into the owner's table with the importer as its
// memory's process, so every QP on the PD resolves its key.
#include <unistd.h>

#include <cstring>

#include "objects.h"

namespace fakeverbs {
Context* make_context(const DeviceSpec* d, pid_t owner, int cmd_fd);  // device.cc
}

using namespace fakeverbs;

FV_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  wire::DeviceRecord rec{};
  if (pread(cmd_fd, &rec, sizeof rec, 0) != sizeof rec || rec.magic != wire::kDevMagic ||
      rec.device >= devices().size()) {
    log_error("ibv_import_device(%d): not the command fd of a fakeverbs context (EINVAL)", cmd_fd);
    errno = EINVAL;
    return nullptr;
  }
  if (!pid_alive(rec.pid)) {
    log_error("ibv_import_device(%d): its owner (pid %d) is gone (ENODEV)", cmd_fd, int(rec.pid));
    errno = ENODEV;
    return nullptr;
  }
  int fd = dup(cmd_fd);  // ibv_close_device closes it
  if (fd < 0) return nullptr;
  return make_context(&devices()[rec.device], rec.pid, fd)->ibv();
}

FV_EXPORT ibv_pd* ibv_import_pd(ibv_context* c, uint32_t pd_handle) {
  Context* ctx = Context::from(c);
  if (!ctx) {
    errno = EINVAL;
    return nullptr;
  }
  auto* pd = new Pd;
  pd->ctx = ctx;
  pd->id = pd_handle;
  pd->imported = true;
  const std::string table = std::to_string(ctx->owner_pid) + ".mr";
  bool found = false;
  if (pd->owner_table.open(table)) {
    auto* t = static_cast<wire::MrTable*>(pd->owner_table.data());
    SharedLock lk(&t->mu);
    for (uint32_t id : t->pd_ids) found |= pd_handle != 0 && id == pd_handle;
  }
  if (!found) {
    log_error("ibv_import_pd: process %d has no PD with handle %u (EINVAL)", int(ctx->owner_pid),
              pd_handle);
    delete pd;
    errno = EINVAL;
    return nullptr;
  }
  pd->shell.owner = pd;
  pd->shell.ibv.context = c;
  pd->shell.ibv.handle = pd_handle;
  ctx->children++;
  return &pd->shell.ibv;
}

FV_EXPORT void ibv_unimport_pd(ibv_pd* p) {
  Pd* pd = owner_of<Pd>(p);
  if (!pd || !pd->imported) {
    log_error("ibv_unimport_pd: not an imported PD (ignored)");
    return;
  }
  // ibv_unimport_pd only releases the process's handle (man ibv_import_pd):
  // MRs and QPs created through it stay valid, and they use the owner's
  // table through this object, so it lives until the last of them goes.
  pd->unimported = true;
  pd->children++;
  pd_child_gone(pd);
}

namespace fakeverbs {
void pd_child_gone(Pd* pd) {
  if (--pd->children != 0 || !pd->unimported) return;
  pd->ctx->children--;
  delete pd;
}
}  // namespace fakeverbs

FV_EXPORT ibv_mr* ibv_import_mr(ibv_pd* p, uint32_t mr_handle) {
  Pd* pd = owner_of<Pd>(p);
  wire::MrTable* t = pd ? pd->mr_table() : nullptr;
  if (!t || mr_handle == 0 || mr_handle >= t->capacity) {
    errno = EINVAL;
    return nullptr;
  }
  wire::MrEntry e;
  {
    SharedLock lk(&t->mu);
    e = t->entries()[mr_handle];
  }
  if (e.key == 0 || e.pd_id != pd->id) {
    log_error("ibv_import_mr: no MR with handle %u in PD %u (EINVAL)", mr_handle, pd->id);
    errno = EINVAL;
    return nullptr;
  }
  auto* mr = new Mr;
  mr->pd = pd;
  mr->slot = mr_handle;
  mr->imported = true;
  mr->shell.owner = mr;
  ibv_mr& m = mr->shell.ibv;
  m.context = pd->ctx->ibv();
  m.pd = p;
  m.addr = reinterpret_cast<void*>(uintptr_t(e.addr));  // in the owner's address space
  m.length = e.length;
  m.handle = mr_handle;
  m.lkey = m.rkey = e.key;
  pd->children++;
  return &m;
}

FV_EXPORT void ibv_unimport_mr(ibv_mr* m) {
  Mr* mr = owner_of<Mr>(m);
  if (!mr || !mr->imported) {
    log_error("ibv_unimport_mr: not an imported MR (ignored)");
    return;
  }
  Pd* pd = mr->pd;
  delete mr;
  pd_child_gone(pd);
}
