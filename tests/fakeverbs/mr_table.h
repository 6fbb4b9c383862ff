// fakeverbs: operations on the entries of a process's MR table (wire.h) that
// more than one process performs -- registrations of importers, the
// ibv_dereg_mr in-flight guard, and the end of a dead importer's MRs.
//
// Contract: every function takes the table's robust mutex itself unless its
// name ends in _locked (then the caller holds it).  A table is the PD
// owner's: an MR registered by a process that imported the PD lives in the
// owner's table with mem_pid naming the process whose memory it is, so any
// QP on the PD (and any peer writing to such a QP) resolves its key there.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "wire.h"

namespace fakeverbs {

// A posted WR's reference to an MR: counted in the entry until released.
struct MrRef {
  wire::MrTable* table = nullptr;  // mapped while the QP's PD exists
  uint32_t slot = 0;
  uint32_t key = 0;
};

// Whose memory an entry describes.
inline pid_t mem_pid_of(const wire::MrTable* t, const wire::MrEntry& e) {
  return e.mem_pid ? e.mem_pid : t->owner_pid;
}

// Frees a slot, remembering its tag so that the next key differs.
void clear_entry_locked(wire::MrEntry& e);

// An entry registered by an importer that has died: its memory is gone, so
// the entry is freed and the key resolves to nothing.  True if so.
bool reap_if_dead_locked(wire::MrTable* t, wire::MrEntry& e);

// Counts one posted WR of this process on MR `lkey` of PD `pd_id` in `t`.
// False (nothing counted) if `lkey` names no such MR -- the WR will fail at
// execution -- or if the entry's per-process slots are all taken (logged).
bool mr_use(wire::MrTable* t, uint32_t lkey, uint32_t pd_id, MrRef* out);
void mr_unuse(const MrRef& r);

// WRs of live processes still referencing the entry (caller holds t->mu).
uint32_t mr_wrs_locked(wire::MrEntry& e);

}  // namespace fakeverbs
