// fakeverbs: small verbs with no object of their own -- fork support, GID
// table, device index, completion channels (refused, not modelled).
#include <endian.h>

#include <cstring>

#include "objects.h"

namespace fakeverbs {
bool port_gid(const DeviceSpec& d, int index, ibv_gid* gid, ibv_gid_type* type);  // device.cc
}

using namespace fakeverbs;

// Nothing of the fake depends on page pinning surviving fork; a child simply
// must not use its parent's verbs objects (as with real verbs).
FV_EXPORT int ibv_fork_init(void) { return 0; }

FV_EXPORT ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

FV_EXPORT int ibv_get_device_index(ibv_device* dev) {
  const DeviceSpec* d = device_of(dev);
  return d ? d->index : -1;
}

FV_EXPORT int ibv_get_pkey_index(ibv_context* c, uint8_t port, __be16 pkey) {
  Context* ctx = Context::from(c);
  if (!ctx || port != 1) return fail(EINVAL), -1;
  if (be16toh(pkey) == 0xffff) return 0;
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

// Completion channels (event-driven completion) are not modelled: refuse
// clearly instead of handing out a channel that never fires.
FV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context*) {
  log_error("ibv_create_comp_channel: completion channels are not modelled (EOPNOTSUPP)");
  errno = EOPNOTSUPP;
  return nullptr;
}

FV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel*) { return fail(EINVAL); }
