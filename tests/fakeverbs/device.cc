// fakeverbs: device list, contexts, device/port/GID/P_Key queries, async
// events.  No sysfs, no provider loading: the devices come from config.h.
#include <endian.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "hca.h"
#include "objects.h"
#include "port.h"

namespace fakeverbs {

int poll_cq_op(ibv_cq* cq, int n, ibv_wc* wc);                        // cq.cc
int req_notify_cq_op(ibv_cq* cq, int solicited_only);                 // cq.cc
int post_send_op(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);     // post.cc
int post_recv_op(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);     // post.cc
int post_srq_recv_op(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);  // dc.cc

Context* Context::from(ibv_context* c) {
  verbs_context* v = verbs_get_ctx(c);
  return v ? reinterpret_cast<Shell<verbs_context, Context>*>(v)->owner : nullptr;
}

void Context::push_async(const ibv_async_event& ev) {
  std::lock_guard<std::mutex> g(ev_mu);
  events.push_back(ev);
  uint64_t one = 1;
  if (write(async_fd, &one, sizeof one) != sizeof one)
    log_error("async event lost: %s", strerror(errno));
}

namespace {

// The fake's DMA is process_vm_writev/readv from the peer, which needs
// ptrace-attach rights on us.  Under Yama ptrace_scope=1 only ancestors have
// them, and sibling ranks are not ancestors: declare any process of ours a
// permitted tracer (PR_SET_PTRACER; harmless where Yama is absent).  Scope 2
// or 3 cannot be lifted by a process: say so once instead of failing later
// with a bare EPERM.
void allow_peers_to_write() {
  static std::once_flag once;
  std::call_once(once, [] {
    int scope = 0;
    if (FILE* f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
      if (fscanf(f, "%d", &scope) != 1) scope = 0;
      fclose(f);
    }
    if (scope >= 2)
      log_error("Yama ptrace_scope=%d: peers cannot process_vm_writev into this process; "
                "fakeverbs needs ptrace_scope 0 or 1", scope);
    else if (scope == 1)
      prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  });
}

void fill_device_attr(const DeviceSpec& d, ibv_device_attr* a) {
  memset(a, 0, sizeof *a);
  snprintf(a->fw_ver, sizeof a->fw_ver, "20.31.1014");
  a->node_guid = htobe64(d.guid);
  a->sys_image_guid = htobe64(d.guid);
  a->max_mr_size = ~0ull;
  a->page_size_cap = 0xfffffffffffff000ull;
  a->vendor_id = 0x02c9;
  a->vendor_part_id = 4123;  // ConnectX-6
  a->hw_ver = 0;
  a->max_qp = 1 << 18;
  a->max_qp_wr = limits().max_qp_wr;
  a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
                        IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN;
  a->max_sge = limits().max_sge;
  a->max_sge_rd = limits().max_sge;
  a->max_cq = 1 << 24;
  a->max_cqe = limits().max_cqe;
  a->max_mr = Limits::kMaxMr;
  a->max_pd = 1 << 24;
  a->max_qp_rd_atom = limits().max_rd_atom;
  a->max_qp_init_rd_atom = limits().max_rd_atom;
  a->max_res_rd_atom = (1 << 18) * limits().max_rd_atom;
  a->atomic_cap = IBV_ATOMIC_HCA;
  // No SRQ, MW, AH/UD, multicast: reported as absent rather than faked.
  a->max_pkeys = Limits::kPkeyTableLen;
  a->local_ca_ack_delay = 16;
  a->phys_port_cnt = 1;
}

int query_device_ex_op(ibv_context* c, const ibv_query_device_ex_input* in,
                       ibv_device_attr_ex* a, size_t size) {
  if (in && in->comp_mask) return fail(EINVAL);
  if (size < sizeof(ibv_device_attr)) return fail(EINVAL);
  Context* ctx = Context::from(c);
  memset(a, 0, size);
  fill_device_attr(*ctx->dev, &a->orig_attr);
  if (vext_field_avail(ibv_device_attr_ex, phys_port_cnt_ex, size)) a->phys_port_cnt_ex = 1;
  return 0;
}

void fill_port_attr(const DeviceSpec& d, ibv_port_attr* p) {
  memset(p, 0, sizeof *p);
  p->state = d.port_state;
  p->max_mtu = IBV_MTU_4096;
  // A RoCE port's MTU follows the Ethernet MTU (1500 -> 1024).
  p->active_mtu = d.roce ? IBV_MTU_1024 : IBV_MTU_4096;
  p->gid_tbl_len = Limits::kGidTableLen;
  p->port_cap_flags = d.roce ? 0x04010000u : 0x02514868u;
  p->max_msg_sz = 0x40000000;
  p->pkey_tbl_len = uint16_t(d.pkey_table_len());
  p->lid = port::lid(d);
  p->sm_lid = d.roce ? 0 : 1;
  p->max_vl_num = d.roce ? 0 : 4;
  p->subnet_timeout = d.roce ? 0 : 18;
  p->active_width = 2;   // 4X
  p->active_speed = 64;  // HDR
  p->phys_state = d.port_state == IBV_PORT_ACTIVE ? 5 /* LinkUp */ : 3 /* Disabled */;
  p->link_layer = d.roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
}

int query_port_op(ibv_context* c, uint8_t port, ibv_port_attr* p, size_t len) {
  if (port != 1) return fail(EINVAL);
  ibv_port_attr full;
  const Context* ctx = Context::from(c);
  fill_port_attr(*ctx->dev, &full);
  if (port::down(*ctx->dev)) {
    full.state = IBV_PORT_DOWN;
    full.phys_state = 3;  // Disabled
  }
  memcpy(p, &full, len < sizeof full ? len : sizeof full);
  return 0;
}

// GID table: IB has index 0 (link-local prefix + GUID); RoCE has its table
// (FAKEVERBS_GIDS; by default the IPv4-mapped address as RoCE v2, index 0,
// and v1, index 1).
bool gid_at(const DeviceSpec& d, int index, ibv_gid* gid, ibv_gid_type* type) {
  if (d.roce) {
    if (index < 0 || size_t(index) >= d.gids.size()) return false;
    *gid = port::gid(d, d.gids[size_t(index)].gid);
    *type = d.gids[size_t(index)].type;
    return true;
  }
  if (index != 0) return false;
  *gid = port::gid(d, d.gid);
  *type = IBV_GID_TYPE_IB;
  return true;
}

}  // namespace

bool port_gid(const DeviceSpec& d, int index, ibv_gid* gid, ibv_gid_type* type) {
  return gid_at(d, index, gid, type);
}

}  // namespace fakeverbs

using namespace fakeverbs;

FV_EXPORT __attribute__((noreturn)) void fakeverbs_unimplemented(const char* name) {
  fprintf(stderr, "fakeverbs: %s is not implemented by the fake libibverbs; "
                  "add it (tests/fakeverbs/FIDELITY.md)\n", name);
  abort();
}

FV_EXPORT ibv_device** ibv_get_device_list(int* num) {
  const auto& devs = devices();
  auto** list = static_cast<ibv_device**>(calloc(devs.size() + 1, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < devs.size(); ++i) list[i] = const_cast<ibv_device*>(&devs[i].dev);
  if (num) *num = int(devs.size());
  return list;
}

FV_EXPORT void ibv_free_device_list(ibv_device** list) { free(list); }

FV_EXPORT const char* ibv_get_device_name(ibv_device* dev) { return dev->name; }

FV_EXPORT __be64 ibv_get_device_guid(ibv_device* dev) {
  const DeviceSpec* d = device_of(dev);
  return d ? htobe64(d->guid) : 0;
}

namespace fakeverbs {

// The context's command fd: a file in the rendezvous directory naming the
// process and device, which a process may pass to another over a Unix socket
// (SCM_RIGHTS) for ibv_import_device (import.cc).
int make_cmd_fd(const DeviceSpec& d, std::string* name) {
  static std::atomic<uint32_t> seq{0};
  *name = std::to_string(getpid()) + ".dev." + std::to_string(++seq);
  int fd = open_new_entry(*name, O_RDWR | O_EXCL);
  if (fd < 0) return -1;
  wire::DeviceRecord rec{wire::kDevMagic, getpid(), uint32_t(d.index)};
  if (write(fd, &rec, sizeof rec) != sizeof rec) {
    close(fd);
    unlink(rendezvous_path(*name).c_str());
    return -1;
  }
  return fd;
}

Context* make_context(const DeviceSpec* d, pid_t owner, int cmd_fd) {
  auto* ctx = new Context;
  ctx->dev = d;
  ctx->shell.owner = ctx;
  verbs_context& v = ctx->shell.ibv;
  v.sz = sizeof(verbs_context);
  v.query_port = query_port_op;
  v.query_device_ex = query_device_ex_op;
  ibv_context& c = v.context;
  c.device = const_cast<ibv_device*>(&d->dev);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c.ops.poll_cq = poll_cq_op;
  c.ops.req_notify_cq = req_notify_cq_op;
  c.ops.post_send = post_send_op;
  c.ops.post_recv = post_recv_op;
  c.ops.post_srq_recv = post_srq_recv_op;
  c.cmd_fd = cmd_fd;
  ctx->owner_pid = owner;
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  ctx->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  c.async_fd = ctx->async_fd;
  hca::register_context(ctx);
  port::attach(ctx);
  allow_peers_to_write();
  return ctx;
}

// Peers name a RoCE port by any GID of its table: each GID but the port's
// own (index 0, its key) is published as a link to the key (qp.cc,
// dest_key_of).
void publish_gids(Context& ctx) {
  const DeviceSpec& d = *ctx.dev;
  for (size_t i = 1; d.roce && i < d.gids.size(); ++i) {
    if (!memcmp(&d.gids[i].gid, &d.gid, sizeof d.gid)) continue;
    const std::string link = "gid." + address_key(true, 0, d.gids[i].gid);
    if (publish_link(link, std::to_string(getpid()) + ".port." + d.address_key())) {
      ctx.gid_links.push_back(link);
    }
  }
}

}  // namespace fakeverbs

FV_EXPORT ibv_context* ibv_open_device(ibv_device* dev) {
  const DeviceSpec* d = device_of(dev);
  if (!d) {
    errno = ENODEV;
    return nullptr;
  }
  std::string name;
  int fd = make_cmd_fd(*d, &name);
  if (fd < 0) {
    log_error("ibv_open_device: cannot create the command file %s: %s", name.c_str(),
              strerror(errno));
    return nullptr;
  }
  Context* ctx = make_context(d, getpid(), fd);
  ctx->cmd_file = name;
  publish_gids(*ctx);
  return ctx->ibv();
}

FV_EXPORT int ibv_close_device(ibv_context* c) {
  Context* ctx = Context::from(c);
  if (!ctx) return fail(EINVAL);
  if (ctx->children.load() != 0)
    log_error("ibv_close_device(%s) with %d objects still allocated (leaked)",
              ctx->dev->dev.name, ctx->children.load());
  hca::unregister_context(ctx);
  port::detach(ctx);
  close(ctx->async_fd);
  if (c->cmd_fd >= 0) close(c->cmd_fd);
  if (!ctx->cmd_file.empty()) remove_entry(ctx->cmd_file);
  for (const std::string& l : ctx->gid_links) remove_entry(l);
  delete ctx;
  return 0;
}

FV_EXPORT int ibv_query_device(ibv_context* c, ibv_device_attr* a) {
  Context* ctx = Context::from(c);
  if (!ctx) return fail(EINVAL);
  fill_device_attr(*ctx->dev, a);
  return 0;
}

// The exported symbol is the pre-1.1.8 ABI, reached only by old binaries or
// when verbs_get_ctx_op fails; the inline ibv_query_port uses query_port_op.
// The caller zeroed the full struct, so writing the common prefix is safe.
FV_EXPORT int (ibv_query_port)(ibv_context* c, uint8_t port, _compat_ibv_port_attr* p) {
  return query_port_op(c, port, reinterpret_cast<ibv_port_attr*>(p),
                       offsetof(ibv_port_attr, flags));
}

FV_EXPORT int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  Context* ctx = Context::from(c);
  if (!ctx || port != 1 || index < 0 || index >= Limits::kGidTableLen) return fail(EINVAL);
  ibv_gid_type t;
  if (!gid_at(*ctx->dev, index, gid, &t)) memset(gid, 0, sizeof *gid);
  return 0;
}

FV_EXPORT int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index,
                                ibv_gid_entry* e, uint32_t flags, size_t size) {
  Context* ctx = Context::from(c);
  if (!ctx || flags || size < sizeof *e || port != 1 || index >= uint32_t(Limits::kGidTableLen))
    return fail(EINVAL);
  ibv_gid_type t;
  memset(e, 0, sizeof *e);
  if (!gid_at(*ctx->dev, int(index), &e->gid, &t)) return fail(ENODATA);
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = t;
  return 0;
}

// rdma-core private (IBVERBS_PRIVATE_*), used by ibv_devinfo.  The enum is
// rdma-core's internal ibv_gid_type_sysfs: 0 = IB/RoCE v1, 1 = RoCE v2.
FV_EXPORT int ibv_query_gid_type(ibv_context* c, uint8_t port, unsigned index, int* type) {
  Context* ctx = Context::from(c);
  ibv_gid g;
  ibv_gid_type t;
  if (!ctx || port != 1 || !gid_at(*ctx->dev, int(index), &g, &t)) return fail(EINVAL), -1;
  *type = t == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
  return 0;
}

FV_EXPORT int ibv_query_pkey(ibv_context* c, uint8_t port, int index, __be16* pkey) {
  Context* ctx = Context::from(c);
  if (!ctx || port != 1 || index < 0 || index >= ctx->dev->pkey_table_len()) return fail(EINVAL);
  *pkey = htobe16(ctx->dev->pkey_at(index));
  return 0;
}

// sysfs cannot be faked for other readers, but programs that read their
// device's attributes through this verb get plausible values.
FV_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  for (const DeviceSpec& d : devices()) {
    if (strcmp(dir, d.dev.ibdev_path) != 0) continue;
    const char* v = nullptr;
    if (!strcmp(file, "board_id")) v = "MT_0000000223";
    else if (!strcmp(file, "fw_ver")) v = "20.31.1014";
    else if (!strcmp(file, "hca_type")) v = "MT4123";
    else if (!strcmp(file, "node_desc")) v = "fakeverbs HCA";
    char numa[16];
    if (!strcmp(file, "device/numa_node") && d.numa >= 0) {
      snprintf(numa, sizeof numa, "%d", d.numa);  // FAKEVERBS_NUMA
      v = numa;
    }
    if (!v || size == 0) break;
    return snprintf(buf, size, "%s", v) >= int(size) ? int(size) - 1 : int(strlen(v));
  }
  errno = ENOENT;
  return -1;
}

FV_EXPORT int ibv_get_async_event(ibv_context* c, ibv_async_event* ev) {
  Context* ctx = Context::from(c);
  port::down(*ctx->dev);  // a flap that has ended raises its PORT_ACTIVE now
  uint64_t v;
  if (read(ctx->async_fd, &v, sizeof v) != sizeof v) return -1;  // errno from read
  std::lock_guard<std::mutex> g(ctx->ev_mu);
  if (ctx->events.empty()) return fail(EAGAIN), -1;
  *ev = ctx->events.front();
  ctx->events.pop_front();
  return 0;
}

FV_EXPORT void ibv_ack_async_event(ibv_async_event*) {}

FV_EXPORT const char* ibv_wc_status_str(ibv_wc_status s) {
  static const char* const names[] = {
      "success", "local length error", "local QP operation error",
      "local EE context operation error", "local protection error",
      "Work Request Flushed Error", "memory management operation error",
      "bad response error", "local access error", "remote invalid request error",
      "remote access error", "remote operation error", "transport retry counter exceeded",
      "RNR retry counter exceeded", "local RDD violation error",
      "remote invalid RD request", "aborted error", "invalid EE context number",
      "invalid EE context state", "fatal error", "response timeout error",
      "general error", "TM error", "TM rendezvous error"};
  unsigned i = unsigned(s);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

FV_EXPORT const char* ibv_port_state_str(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "PORT_NOP";
    case IBV_PORT_DOWN: return "PORT_DOWN";
    case IBV_PORT_INIT: return "PORT_INIT";
    case IBV_PORT_ARMED: return "PORT_ARMED";
    case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
  }
  return "invalid state";
}

FV_EXPORT const char* ibv_node_type_str(ibv_node_type t) {
  return t == IBV_NODE_CA ? "InfiniBand channel adapter" : "unknown";
}
