// fakeverbs: small verbs with no object of their own -- fork support, GID
// table, device index, completion channels (refused, not modelled).
#include <endian.h>

#include <cstring>

#include "objects.h"

namespace fakeverbs {
bool port_gid(const DeviceSpec& d, int index, ibv_gid* gid, ibv_gid_type* type);  // device.cc
}

using namespace fakeverbs;

// Accepted, not modelled: the fake does not mark MRs MADV_DONTFORK, so
// ibv_is_fork_initialized stays DISABLED (below). A child must not use its
// parent's verbs objects (as with real verbs).
FV_EXPORT int ibv_fork_init(void) { return 0; }

// DISABLED: the fake's pins (vmsplice references, placement.cc) are not the
// kernel's FOLL_PIN, so fork() makes the parent's registered pages
// copy-on-write and its next write moves it off them - what an HCA's MR
// sees on a kernel without fork support. Reporting UNNEEDED would be a lie.
FV_EXPORT ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_DISABLED; }

FV_EXPORT int ibv_get_device_index(ibv_device* dev) {
  const DeviceSpec* d = device_of(dev);
  return d ? d->index : -1;
}

FV_EXPORT int ibv_get_pkey_index(ibv_context* c, uint8_t port, __be16 pkey) {
  Context* ctx = Context::from(c);
  if (!ctx || port != 1) return fail(EINVAL), -1;
  for (int i = 0; i < ctx->dev->pkey_table_len(); ++i) {
    if (ctx->dev->pkey_at(i) == be16toh(pkey)) return i;
  }
  errno = ENOENT;
  return -1;
}

FV_EXPORT ssize_t _ibv_query_gid_table(ibv_context* c, ibv_gid_entry* entries, size_t max,
                                       uint32_t flags, size_t entry_size) {
  Context* ctx = Context::from(c);
  if (!ctx || flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  size_t n = 0;
  for (int i = 0; i < Limits::kGidTableLen; ++i) {
    ibv_gid g;
    ibv_gid_type t;
    if (!port_gid(*ctx->dev, i, &g, &t)) continue;
    if (n == max) return -ENOMEM;
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size);
    memset(e, 0, entry_size);
    e->gid = g;
    e->gid_index = uint32_t(i);
    e->port_num = 1;
    e->gid_type = t;
    ++n;
  }
  return ssize_t(n);
}



// rdma-core's own helpers for fork safety (MADV_DONTFORK / DOFORK): not
// modelled, like ibv_fork_init above; they do nothing.
FV_EXPORT int ibv_dontfork_range(void*, size_t) { return 0; }
FV_EXPORT int ibv_dofork_range(void*, size_t) { return 0; }

// man ibv_query_qp_data_in_order: 1 if a message's data is written in order.
// Never for the fake: its DMA places 64-byte pieces in a random order
// (placement.h), as an HCA may; an engine must wait for the completion.
FV_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }

FV_EXPORT const char* ibv_event_type_str(ibv_event_type e) {
  static const char* const names[] = {
      "CQ error", "local work queue catastrophic error", "invalid request local work queue error",
      "local access violation work queue error", "communication established",
      "send queue drained", "path migrated", "path migration request error",
      "local catastrophic error", "port active", "port error", "LID change",
      "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
      "last WQE reached", "client reregistration", "GID table change", "WQ fatal"};
  unsigned i = unsigned(e);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

namespace {
uint64_t own_stale(uint64_t wire::MrTable::*field) {
  wire::MrTable* t = own_mr_table();
  if (!t) return 0;
  SharedLock lk(&t->mu);
  return t->*field;
}
}  // namespace

// Test hooks (FAKEVERBS_PRIVATE, not rdma-core): how many work requests wrote
// into / read from pages of this process that were remapped after their
// registration (placement.h).  Reached with dlsym(RTLD_DEFAULT, ...).
FV_EXPORT uint64_t fakeverbs_stale_writes(void) { return own_stale(&wire::MrTable::stale_writes); }
FV_EXPORT uint64_t fakeverbs_stale_reads(void) { return own_stale(&wire::MrTable::stale_reads); }
