// fakeverbs: protection domains and memory registration.
//
// All MRs of a process live in one shared table ("<pid>.mr") so that a peer
// executing an RDMA operation can check the rkey, range, PD and access flags
// exactly where an HCA's responder would.  Keys are (slot << 8 | tag): a
// stale key of a deregistered MR does not match a later MR in the same slot.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <unordered_map>

#include "objects.h"

namespace fakeverbs {
namespace {

struct Registry {
  pid_t pid = 0;
  MappedFile file;
  wire::MrTable* table = nullptr;
  std::unordered_map<uint32_t, Mr*> by_key;
  uint32_t next_tag = 1;
  uint32_t next_pd = 1;
};

std::mutex g_mu;
Registry* g_reg = nullptr;

// Caller holds g_mu.  After fork the child starts an empty registry (verbs
// resources are not inherited across fork, as without ibv_fork_init).
Registry& registry() {
  if (!g_reg || g_reg->pid != getpid()) {
    g_reg = new Registry;  // the parent's one is deliberately leaked in the child
    g_reg->pid = getpid();
  }
  return *g_reg;
}

wire::MrTable* table_locked(Registry& r) {
  if (r.table) return r.table;
  size_t size = sizeof(wire::MrTable) + sizeof(wire::MrEntry) * Limits::kMaxMr;
  std::string name = std::to_string(getpid()) + ".mr";
  if (!r.file.create(name, size)) {
    log_error("cannot create MR table %s: %s", name.c_str(), strerror(errno));
    return nullptr;
  }
  auto* t = static_cast<wire::MrTable*>(r.file.data());
  t->owner_pid = getpid();
  t->capacity = Limits::kMaxMr;
  shared_mutex_init(&t->mu);
  shared_mutex_init(&t->atomic_mu);
  t->magic = wire::kMrMagic;
  r.table = t;
  return t;
}

// Registration pins pages; unmapped memory makes ibv_reg_mr fail with EFAULT.
bool range_mapped(const void* addr, size_t len) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t a = uintptr_t(addr) & ~uintptr_t(page - 1);
  uintptr_t end = uintptr_t(addr) + len;
  // msync fails with ENOMEM on any unmapped page in the range.
  return msync(reinterpret_cast<void*>(a), end - a, MS_ASYNC) == 0;
}

}  // namespace

wire::MrTable* own_mr_table() {
  std::lock_guard<std::mutex> g(g_mu);
  return table_locked(registry());
}

Mr* find_local_mr(uint32_t lkey) {
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  auto it = r.by_key.find(lkey);
  return it == r.by_key.end() ? nullptr : it->second;
}

uint32_t new_pd_id() {
  std::lock_guard<std::mutex> g(g_mu);
  return registry().next_pd++;
}

}  // namespace fakeverbs

using namespace fakeverbs;

FV_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* c) {
  Context* ctx = Context::from(c);
  if (!ctx) {
    errno = EINVAL;
    return nullptr;
  }
  auto* pd = new Pd;
  pd->ctx = ctx;
  pd->id = new_pd_id();
  pd->shell.owner = pd;
  pd->shell.ibv.context = c;
  pd->shell.ibv.handle = pd->id;
  ctx->children++;
  return &pd->shell.ibv;
}

FV_EXPORT int ibv_dealloc_pd(ibv_pd* p) {
  Pd* pd = owner_of<Pd>(p);
  if (!pd) return fail(EINVAL);
  if (pd->children.load() != 0) {
    log_error("ibv_dealloc_pd: PD still has %d MRs/QPs (EBUSY)", pd->children.load());
    return fail(EBUSY);
  }
  pd->ctx->children--;
  delete pd;
  return 0;
}

FV_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* p, void* addr, size_t length, uint64_t iova,
                                   unsigned int access) {
  Pd* pd = owner_of<Pd>(p);
  const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                         IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                         IBV_ACCESS_RELAXED_ORDERING;
  // man ibv_reg_mr: "If IBV_ACCESS_REMOTE_WRITE or IBV_ACCESS_REMOTE_ATOMIC
  // is set, then IBV_ACCESS_LOCAL_WRITE must be set too."
  const bool needs_local_write = access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  if (!pd || (access & ~known) || (needs_local_write && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    log_error("ibv_reg_mr: invalid access flags 0x%x (EINVAL)", access);
    errno = EINVAL;
    return nullptr;
  }
  // The fake addresses remote memory by virtual address, so an IOVA other
  // than the address is not modelled; refuse rather than misbehave.
  if (iova != uintptr_t(addr)) {
    log_error("ibv_reg_mr_iova: iova != addr is not supported by fakeverbs");
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (length == 0 || !addr || !range_mapped(addr, length)) {
    errno = length == 0 ? EINVAL : EFAULT;
    return nullptr;
  }
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  wire::MrTable* t = table_locked(r);
  if (!t) {
    errno = ENOMEM;
    return nullptr;
  }
  uint32_t slot = 1;  // slot 0 unused so that key 0 never names an MR
  {
    SharedLock lk(&t->mu);
    while (slot < t->capacity && t->entries()[slot].key != 0) ++slot;
    if (slot == t->capacity) {
      errno = ENOMEM;
      return nullptr;
    }
    uint32_t tag = r.next_tag++ & 0xff;
    if (tag == 0) tag = r.next_tag++ & 0xff;
    wire::MrEntry& e = t->entries()[slot];
    e.pd_id = pd->id;
    e.addr = uintptr_t(addr);
    e.length = length;
    e.access = access;
    e.key = (slot << 8) | tag;
  }
  auto* mr = new Mr;
  mr->pd = pd;
  mr->slot = slot;
  mr->shell.owner = mr;
  ibv_mr& m = mr->shell.ibv;
  m.context = pd->ctx->ibv();
  m.pd = p;
  m.addr = addr;
  m.length = length;
  m.handle = slot;
  m.lkey = m.rkey = t->entries()[slot].key;
  r.by_key[m.lkey] = mr;
  pd->children++;
  return &m;
}

FV_EXPORT ibv_mr* (ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, uintptr_t(addr), unsigned(access));
}

FV_EXPORT ibv_mr* (ibv_reg_mr_iova)(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                  int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, unsigned(access));
}

FV_EXPORT int ibv_dereg_mr(ibv_mr* m) {
  Mr* mr = owner_of<Mr>(m);
  if (!mr) return fail(EINVAL);
  // On hardware, deregistering memory a posted operation still uses makes
  // that operation fail (or corrupt memory on the peer's view); the fake
  // catches it at the call so the bug is found where it is made.
  if (int n = mr->in_flight.load(); n != 0) {
    log_error("ibv_dereg_mr: MR lkey 0x%x still used by %d posted work request(s) "
              "not yet completed and polled (EBUSY)", m->lkey, n);
    return fail(EBUSY);
  }
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  if (r.table) {
    SharedLock lk(&r.table->mu);
    memset(&r.table->entries()[mr->slot], 0, sizeof(wire::MrEntry));
  }
  r.by_key.erase(m->lkey);
  mr->pd->children--;
  delete mr;
  return 0;
}
