// fakeverbs: protection domains and memory registration.
//
// The MRs of a process's PDs live in one shared table ("<pid>.mr") so that a
// peer executing an RDMA operation can check the rkey, range, PD and access
// flags exactly where an HCA's responder would.  A process that imported
// another's PD registers its own memory into the owner's table (the entry's
// mem_pid names it; mr_table.h); its pinning and RLIMIT_MEMLOCK accounting
// are its own.  Keys are (slot << 8 | tag) with a
// random slot and a random 8-bit tag (mlx5's key variant), so two processes
// registering the same buffers in the same order get different keys, and a
// stale key of a deregistered MR does not match a later MR in the same slot.
//
// Limits as the kernel's ib_umem_get: registered pages count against
// RLIMIT_MEMLOCK per process (overlapping MRs count twice) -> ENOMEM.  The
// kernel exempts CAP_IPC_LOCK (root); the fake does not, because jobs run
// unprivileged while CI runs as root.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "fault.h"
#include "hca.h"
#include "objects.h"
#include "placement.h"

namespace fakeverbs {
namespace {

struct Registry {
  pid_t pid = 0;
  MappedFile file;
  wire::MrTable* table = nullptr;
  std::unordered_map<uint32_t, Mr*> by_key;  // every MR this process registered
  uint64_t key_rng = hca::stream_seed(0x4b455900000000ull | uint64_t(getpid()));
  uint64_t pinned_bytes = 0;  // page-rounded, against RLIMIT_MEMLOCK
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
    g_reg->key_rng = hca::stream_seed(0x4b455900000000ull | uint64_t(getpid()));
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

uint64_t pinned_size(const void* addr, size_t len) {
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t first = uintptr_t(addr) & ~(page - 1);
  const uint64_t end = (uintptr_t(addr) + len + page - 1) & ~(page - 1);
  return end - first;
}

}  // namespace

wire::MrTable* own_mr_table() {
  std::lock_guard<std::mutex> g(g_mu);
  return table_locked(registry());
}

// Random, so that a PD imported by another process (whose own PDs share the
// id space) keeps its identity; recorded in the table for ibv_import_pd.
uint32_t new_pd_id() {
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  uint32_t id = 0;
  while (id == 0) id = uint32_t(next_random(r.key_rng));
  if (wire::MrTable* t = table_locked(r)) {
    SharedLock lk(&t->mu);
    for (uint32_t& slot : t->pd_ids)
      if (slot == 0) {
        slot = id;
        break;
      }
  }
  return id;
}

void forget_pd_id(uint32_t id) {
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  if (!r.table) return;
  SharedLock lk(&r.table->mu);
  for (uint32_t& slot : r.table->pd_ids)
    if (slot == id) slot = 0;
}

wire::MrTable* Pd::mr_table() {
  return imported ? static_cast<wire::MrTable*>(owner_table.data()) : own_mr_table();
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
  if (pd->imported) {
    log_error("ibv_dealloc_pd: PD %u is imported; release it with ibv_unimport_pd (EINVAL)",
              pd->id);
    return fail(EINVAL);
  }
  forget_pd_id(pd->id);
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
  if (pd && (access & IBV_ACCESS_RELAXED_ORDERING) && !limits().relaxed_ordering) {
    // FAKEVERBS_RELAXED_ORDERING=0: a device (or stack) that does not take
    // the flag refuses it here; the caller registers again without it.
    log_error("ibv_reg_mr: IBV_ACCESS_RELAXED_ORDERING is not supported by this device "
              "(FAKEVERBS_RELAXED_ORDERING=0) (EINVAL)");
    errno = EINVAL;
    return nullptr;
  }
  if (!pd || (access & ~known) || (needs_local_write && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    log_error("ibv_reg_mr: invalid access flags 0x%x (EINVAL)", access);
    errno = EINVAL;
    return nullptr;
  }
  if (fault::fail_reg_mr()) {
    log_error("FAKEVERBS_FAULT: failing ibv_reg_mr of %zu bytes (ENOMEM)", length);
    errno = ENOMEM;
    return nullptr;
  }
  if (length == 0 || !addr || !range_mapped(addr, length)) {
    errno = length == 0 ? EINVAL : EFAULT;
    return nullptr;
  }
  const uint64_t pin_len = pinned_size(addr, length);
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      r.pinned_bytes + pin_len > lim.rlim_cur) {
    log_error("ibv_reg_mr: %llu bytes pinned + %llu would pass RLIMIT_MEMLOCK (%llu) (ENOMEM)",
              (unsigned long long)r.pinned_bytes, (unsigned long long)pin_len,
              (unsigned long long)lim.rlim_cur);
    errno = ENOMEM;
    return nullptr;
  }
  // Our own table exists even when the MR goes into a PD owner's: it holds
  // the stale-access counters of this process's memory.
  wire::MrTable* own = table_locked(r);
  // The PD's table: ours, or the owner's for an imported PD -- there every
  // QP on the PD, and every peer writing to one, resolves the key.
  wire::MrTable* t = pd->imported ? pd->mr_table() : own;
  if (!t || !own) {
    errno = ENOMEM;
    return nullptr;
  }
  uint32_t slot;
  uint32_t key;
  {
    SharedLock lk(&t->mu);
    // Random free slot (slot 0 unused so that key 0 never names an MR),
    // reserved (pd_id 0: no lookup matches it) because importers of the
    // PD allocate in the same table.  The key is also new to this process,
    // which names its pin records by key.
    const uint32_t start = 1 + uint32_t(next_random(r.key_rng) % (t->capacity - 1));
    slot = start;
    for (;;) {
      wire::MrEntry& e = t->entries()[slot];
      reap_if_dead_locked(t, e);
      if (e.key == 0) {
        uint32_t tag = uint32_t(next_random(r.key_rng) & 0xff);
        if (tag == 0 || tag == e.last_tag)
          tag = (e.last_tag + 1) & 0xff ? (e.last_tag + 1) & 0xff : 1;
        key = (slot << 8) | tag;
        if (!r.by_key.count(key)) break;
      }
      slot = slot + 1 == t->capacity ? 1 : slot + 1;
      if (slot == start) {
        log_error("ibv_reg_mr: MR table of process %d full (%u MRs) (ENOMEM)",
                  int(t->owner_pid), t->capacity - 1);
        errno = ENOMEM;
        return nullptr;
      }
    }
    wire::MrEntry& e = t->entries()[slot];
    e.key = key;
    e.pd_id = 0;
    e.mem_pid = getpid();
  }
  // Fault the pages in and record them (outside the table lock: it may take
  // a while for a large MR).
  if (!pin_pages(key, addr, length, access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                              IBV_ACCESS_REMOTE_ATOMIC))) {
    log_error("ibv_reg_mr: cannot fault in [%p, +%zu) %s (EFAULT)", addr, length,
              strerror(errno));
    SharedLock lk(&t->mu);
    clear_entry_locked(t->entries()[slot]);
    errno = EFAULT;
    return nullptr;
  }
  {
    SharedLock lk(&t->mu);
    wire::MrEntry& e = t->entries()[slot];
    e.addr = uintptr_t(addr);
    e.iova = iova;
    e.length = length;
    e.access = access;
    e.pd_id = pd->id;  // visible from here on
  }
  r.pinned_bytes += pin_len;
  auto* mr = new Mr;
  mr->pd = pd;
  mr->slot = slot;
  mr->access = access;
  mr->shell.owner = mr;
  ibv_mr& m = mr->shell.ibv;
  m.context = pd->ctx->ibv();
  m.pd = p;
  m.addr = addr;
  m.length = length;
  m.handle = slot;
  m.lkey = m.rkey = key;
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
  if (mr->imported) {
    log_error("ibv_dereg_mr of an imported MR (lkey 0x%x): the fake lets only its registrant "
              "deregister it; release the import with ibv_unimport_mr (EINVAL)", m->lkey);
    return fail(EINVAL);
  }
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  // (Pd::mr_table() would take g_mu for our own table.)
  if (wire::MrTable* t = mr->pd->imported ? mr->pd->mr_table() : r.table) {
    SharedLock lk(&t->mu);
    wire::MrEntry& e = t->entries()[mr->slot];
    // On hardware, deregistering memory a posted operation still uses makes
    // that operation fail (or corrupt memory on the peer's view); the fake
    // catches it at the call so the bug is found where it is made.  The
    // count covers WRs posted by any live process on the PD (mr_table.h).
    if (e.key == m->lkey) {
      if (uint32_t n = mr_wrs_locked(e); n != 0) {
        log_error("ibv_dereg_mr: MR lkey 0x%x still used by %u posted work request(s) "
                  "not yet completed and polled (EBUSY)", m->lkey, n);
        return fail(EBUSY);
      }
      clear_entry_locked(e);  // the next key in this slot gets another tag
    }
  }
  unpin_pages(m->lkey);
  const uint64_t pin_len = pinned_size(m->addr, m->length);
  r.pinned_bytes -= std::min(r.pinned_bytes, pin_len);
  r.by_key.erase(m->lkey);
  Pd* pd = mr->pd;
  delete mr;
  pd_child_gone(pd);
  return 0;
}

// Test hook (FAKEVERBS_PRIVATE, not rdma-core): the access flags an MR of this
// process was registered with, or -1 for a key it does not own. Lets a test
// assert what an engine asked for (e.g. LOCAL_WRITE on send buffers), which
// no verb reports back. Reached with dlsym(RTLD_DEFAULT, ...).
FV_EXPORT int fakeverbs_mr_access(uint32_t key) {
  std::lock_guard<std::mutex> g(g_mu);
  Registry& r = registry();
  auto it = r.by_key.find(key);
  return it == r.by_key.end() ? -1 : int(it->second->access);
}
