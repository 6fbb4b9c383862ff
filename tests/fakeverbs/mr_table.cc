#include "mr_table.h"

#include <unistd.h>

#include <cstring>

#include "common.h"
#include "rendezvous.h"

namespace fakeverbs {

void clear_entry_locked(wire::MrEntry& e) {
  const uint32_t last_tag = e.key & 0xff;
  memset(&e, 0, sizeof e);
  e.last_tag = last_tag;
}

bool reap_if_dead_locked(wire::MrTable* t, wire::MrEntry& e) {
  if (e.key == 0 || e.mem_pid == 0 || e.mem_pid == t->owner_pid || pid_alive(e.mem_pid))
    return false;
  clear_entry_locked(e);
  return true;
}

bool mr_use(wire::MrTable* t, uint32_t lkey, uint32_t pd_id, MrRef* out) {
  const uint32_t slot = lkey >> 8;
  if (!t || slot == 0 || slot >= t->capacity) return false;
  const pid_t self = getpid();
  SharedLock lk(&t->mu);
  wire::MrEntry& e = t->entries()[slot];
  if (e.key != lkey || e.pd_id != pd_id || reap_if_dead_locked(t, e)) return false;
  wire::MrUse* free_use = nullptr;
  for (wire::MrUse& u : e.users) {
    if (u.pid == self) {
      u.wrs++;
      *out = {t, slot, lkey};
      return true;
    }
    if (!free_use && (u.pid == 0 || u.wrs == 0 || !pid_alive(u.pid))) free_use = &u;
  }
  if (!free_use) {
    static bool told = false;
    if (!told)
      log_error("MR lkey 0x%x is used by WRs of more than %d processes: the ibv_dereg_mr "
                "guard does not see this process's", lkey, wire::MrEntry::kUsers);
    told = true;
    return false;
  }
  *free_use = {self, 1};
  *out = {t, slot, lkey};
  return true;
}

void mr_unuse(const MrRef& r) {
  if (!r.table) return;
  const pid_t self = getpid();
  SharedLock lk(&r.table->mu);
  wire::MrEntry& e = r.table->entries()[r.slot];
  if (e.key != r.key) return;  // the registrant died and the entry was reaped
  for (wire::MrUse& u : e.users)
    if (u.pid == self && u.wrs) {
      u.wrs--;
      return;
    }
}

uint32_t mr_wrs_locked(wire::MrEntry& e) {
  uint32_t n = 0;
  for (wire::MrUse& u : e.users)
    if (u.pid && u.wrs && pid_alive(u.pid)) n += u.wrs;
  return n;
}

}  // namespace fakeverbs
