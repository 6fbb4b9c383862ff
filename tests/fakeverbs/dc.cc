// fakeverbs: Dynamically Connected transport (mlx5 DC) -- shared receive
// queues, address handles, DCT and DCI queue pairs made by
// mlx5dv_create_qp (libmlx5 forwards to fakeverbs_dc_create_qp), and the
// ibv_qp_ex work-request API a DCI is posted through (ibv_wr_start,
// ibv_wr_rdma_write[_imm], ibv_wr_set_sge[_list], ibv_wr_set_inline_data,
// mlx5dv_wr_set_dc_addr, ibv_wr_complete / ibv_wr_abort).
//
// What is modelled (FIDELITY.md, "DC"): a DCT is a responder reached by
// (port address, DCT number) whose incoming work requests must carry its
// access key and whose writes with immediate consume its SRQ's receives and
// complete on its receive CQ; a DCI names its destination per work request
// and executes its work requests in posting order, one stream.
#include <unistd.h>

#include <cstring>

#include "fault.h"
#include "hca.h"
#include "objects.h"
#include "port.h"

namespace fakeverbs {

namespace {

constexpr int kDctInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kDctRtr = IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU;
constexpr int kDciInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
constexpr int kDciRtr = IBV_QP_STATE | IBV_QP_PATH_MTU;
constexpr int kDciRts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

std::atomic<uint32_t> g_srq_seq{0};

Qp* qp_of(ibv_qp_ex* x) { return owner_of<Qp>(&x->qp_base); }
Qp* qp_of(mlx5dv_qp_ex* d) {
  auto* shell = reinterpret_cast<QpShell*>(reinterpret_cast<char*>(d) - offsetof(QpShell, dv));
  return shell->owner;
}

// The WR being built: the last one ibv_wr_* started (nullptr: none, an error).
SendWr* building(Qp* qp) {
  if (!qp->building || qp->batch.empty()) {
    if (qp->building) qp->build_error = EINVAL;  // a setter before any WR
    return nullptr;
  }
  return &qp->batch.back();
}

void start_wr(ibv_qp_ex* x, ibv_wr_opcode op, uint32_t rkey, uint64_t addr, uint32_t imm) {
  Qp* qp = qp_of(x);
  if (!qp->building) {
    log_error("ibv_wr_*: QP 0x%x: no ibv_wr_start before the work request", qp->qpn());
    return;
  }
  SendWr w;
  w.wr_id = x->wr_id;
  w.flags = x->wr_flags;
  w.opcode = op;
  w.rkey = rkey;
  w.remote_addr = addr;
  w.imm = imm;
  qp->batch.push_back(std::move(w));
}

void wr_start(ibv_qp_ex* x) {
  Qp* qp = qp_of(x);
  std::lock_guard<std::mutex> g(qp->mu);
  qp->building = true;
  qp->build_error = 0;
  qp->batch.clear();
}

void wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) {
  start_wr(x, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

void wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, __be32 imm) {
  start_wr(x, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

void wr_set_sge_list(ibv_qp_ex* x, size_t n, const ibv_sge* list) {
  Qp* qp = qp_of(x);
  SendWr* w = building(qp);
  if (!w) return;
  if (n > qp->cap.max_send_sge) {
    log_error("ibv_wr_set_sge_list: QP 0x%x: %zu SGEs above max_send_sge %u", qp->qpn(), n,
              qp->cap.max_send_sge);
    qp->build_error = EINVAL;
    return;
  }
  w->is_inline = false;
  w->sge.assign(list, list + n);
}

void wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge s{addr, length, lkey};
  wr_set_sge_list(x, 1, &s);
}

void wr_set_inline_data_list(ibv_qp_ex* x, size_t n, const ibv_data_buf* list) {
  Qp* qp = qp_of(x);
  SendWr* w = building(qp);
  if (!w) return;
  w->is_inline = true;
  w->sge.clear();
  w->inline_data.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto* p = static_cast<const uint8_t*>(list[i].addr);
    w->inline_data.insert(w->inline_data.end(), p, p + list[i].length);
  }
  if (w->inline_data.size() > qp->cap.max_inline_data) {
    log_error("ibv_wr_set_inline_data: QP 0x%x: %zu bytes above max_inline_data %u", qp->qpn(),
              w->inline_data.size(), qp->cap.max_inline_data);
    qp->build_error = EINVAL;
  }
}

void wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length) {
  const ibv_data_buf b{addr, length};
  wr_set_inline_data_list(x, 1, &b);
}

void wr_set_dc_addr(mlx5dv_qp_ex* d, ibv_ah* ah, uint32_t dctn, uint64_t key) {
  Qp* qp = qp_of(d);
  SendWr* w = building(qp);
  Ah* a = owner_of<Ah>(ah);
  if (!w) return;
  if (!a || dctn > 0xffffff) {
    log_error("mlx5dv_wr_set_dc_addr: QP 0x%x: %s", qp->qpn(),
              a ? "DCT number above 24 bits" : "null address handle");
    qp->build_error = EINVAL;
    return;
  }
  w->dc = true;
  w->dc_dest_key = a->dest_key;
  w->dc_dctn = dctn;
  w->dc_key = key;
}

// What the driver refuses at ibv_wr_complete: every WR must be complete
// (an opcode the QP was created for, a DC address) and the queue must hold
// them all. nullptr when the batch may go.
const char* check_batch(const Qp& qp) {
  if (qp.build_error) return "a setter failed";
  const uint64_t ops = qp.send_ops;
  const ibv_qp_state st = qp.state();
  if (st != IBV_QPS_RTS && st != IBV_QPS_ERR) return "the DCI is not in RTS";
  if (qp.sq_used.load() + qp.batch.size() > qp.cap.max_send_wr) return "send queue full";
  for (const SendWr& w : qp.batch) {
    const uint64_t need = w.opcode == IBV_WR_RDMA_WRITE ? IBV_QP_EX_WITH_RDMA_WRITE
                                                        : IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    if (!(ops & need)) return "an opcode missing from the QP's send_ops_flags";
    if (!w.dc) return "a work request without mlx5dv_wr_set_dc_addr";
  }
  return nullptr;
}

int wr_complete(ibv_qp_ex* x) {
  Qp* qp = qp_of(x);
  std::lock_guard<std::mutex> g(qp->mu);
  if (!qp->building) return fail(EINVAL);
  qp->building = false;
  if (fault::fail_post_send()) {  // a DCI's post, counted with ibv_post_send's
    log_error("FAKEVERBS_FAULT: failing ibv_wr_complete on DCI 0x%x", qp->qpn());
    qp->batch.clear();
    return fail(ENOMEM);
  }
  if (const char* why = check_batch(*qp)) {
    log_error("ibv_wr_complete: QP 0x%x: %s; nothing posted", qp->qpn(), why);
    qp->batch.clear();
    return fail(!strcmp(why, "send queue full") ? ENOMEM : EINVAL);
  }
  for (SendWr& w : qp->batch) {
    if (fault::dc_bad_key_now()) {
      log_error("FAKEVERBS_FAULT: DCI 0x%x wr_id %llu goes with a wrong DC access key",
                qp->qpn(), (unsigned long long)w.wr_id);
      w.dc_key ^= 1;
    }
    enqueue_send(*qp, std::move(w), 0);
  }
  qp->batch.clear();
  hca::kick();  // the doorbell
  return 0;
}

void wr_abort(ibv_qp_ex* x) {
  Qp* qp = qp_of(x);
  std::lock_guard<std::mutex> g(qp->mu);
  qp->building = false;
  qp->batch.clear();
}

void set_dci_ops(Qp* qp, uint64_t send_ops) {
  ibv_qp_ex& x = qp->shell.ex;
  qp->send_ops = send_ops;  // what check_batch allows
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  qp->shell.dv.wr_set_dc_addr = wr_set_dc_addr;
}

}  // namespace

int post_srq_recv_op(ibv_srq* s, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Srq* srq = owner_of<Srq>(s);
  if (!srq) return fail(EINVAL);
  wire::QpShared* sh = srq->sh;
  SharedLock lk(&sh->mu);
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > srq->max_sge ||
        (wr->num_sge > 0 && !wr->sg_list)) {
      log_error("ibv_post_srq_recv: num_sge %d above max_sge %u (EINVAL)", wr->num_sge,
                srq->max_sge);
      *bad = wr;
      return fail(EINVAL);
    }
    if (sh->rq_tail - sh->rq_head >= sh->rq_cap) {
      log_error("ibv_post_srq_recv: SRQ full (%u) (ENOMEM)", sh->rq_cap);
      *bad = wr;
      return fail(ENOMEM);
    }
    wire::RecvWqe* r = sh->wqe(sh->rq_tail);
    r->wr_id = wr->wr_id;
    r->num_sge = uint32_t(wr->num_sge);
    if (wr->num_sge) memcpy(r->sge(), wr->sg_list, sizeof(ibv_sge) * size_t(wr->num_sge));
    sh->rq_tail++;
  }
  return 0;
}

namespace {

// Checks of mlx5dv_create_qp's attributes; nullptr when they describe a DCT
// or DCI fakeverbs models.
const char* check_dc_attr(const ibv_qp_init_attr_ex* ia, const mlx5dv_qp_init_attr* dv) {
  if (!ia || !dv) return "null attributes";
  if (ia->qp_type != IBV_QPT_DRIVER) return "qp_type must be IBV_QPT_DRIVER for DC";
  if (!(ia->comp_mask & IBV_QP_INIT_ATTR_PD) || !ia->pd) return "a PD is required";
  if (!(dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC)) return "only DC QPs are modelled";
  if (!ia->send_cq || !ia->recv_cq) return "send_cq and recv_cq are required";
  const int type = int(dv->dc_init_attr.dc_type);
  if (type == MLX5DV_DCTYPE_DCT) {
    if (!ia->srq) return "a DCT needs an SRQ";
    return nullptr;
  }
  if (type != MLX5DV_DCTYPE_DCI) return "dc_type is neither DCT nor DCI";
  if (ia->srq || ia->cap.max_recv_wr) return "a DCI has no receive queue";
  if (!(ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) || !ia->send_ops_flags)
    return "a DCI needs send_ops_flags";
  if (ia->send_ops_flags & ~uint64_t(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM))
    return "send_ops_flags beyond RDMA WRITE [with immediate] are not modelled";
  if (ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > uint32_t(limits().max_qp_wr))
    return "max_send_wr outside 1..max_qp_wr";
  if (ia->cap.max_send_sge > uint32_t(limits().max_sge)) return "max_send_sge above max_sge";
  if (ia->cap.max_inline_data > limits().max_inline) return "max_inline_data above the limit";
  return nullptr;
}

}  // namespace

bool dc_transition_ok(int dc_type, ibv_qp_state cur, ibv_qp_state next, int mask) {
  auto exact = [mask](int req) { return mask == req; };
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return exact(IBV_QP_STATE);
  const bool dct = dc_type == MLX5DV_DCTYPE_DCT;
  if (cur == IBV_QPS_RESET) return next == IBV_QPS_INIT && exact(dct ? kDctInit : kDciInit);
  if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    return dct ? exact(kDctRtr) : (mask & ~IBV_QP_AV) == kDciRtr;  // a DCI's AV is optional
  }
  // A DCT lives in RTR: it only responds.
  return !dct && cur == IBV_QPS_RTR && next == IBV_QPS_RTS && exact(kDciRts);
}

}  // namespace fakeverbs

using namespace fakeverbs;

FV_EXPORT ibv_srq* ibv_create_srq(ibv_pd* p, ibv_srq_init_attr* ia) {
  Pd* pd = owner_of<Pd>(p);
  if (!pd || !ia || ia->attr.max_wr < 1 || ia->attr.max_wr > uint32_t(limits().max_qp_wr) ||
      ia->attr.max_sge < 1 || ia->attr.max_sge > uint32_t(limits().max_sge)) {
    log_error("ibv_create_srq: null PD or max_wr/max_sge outside the device's limits (EINVAL)");
    errno = EINVAL;
    return nullptr;
  }
  auto* srq = new Srq;
  srq->ctx = pd->ctx;
  srq->pd = pd;
  srq->max_sge = ia->attr.max_sge;
  const std::string name = std::to_string(getpid()) + ".srq." + std::to_string(++g_srq_seq);
  const size_t size = sizeof(wire::QpShared) +
                      ia->attr.max_wr * (sizeof(wire::RecvWqe) + srq->max_sge * sizeof(ibv_sge));
  if (!srq->file.create(name, size)) {
    const int e = errno;
    delete srq;
    errno = e;
    return nullptr;
  }
  wire::QpShared* sh = srq->sh = static_cast<wire::QpShared*>(srq->file.data());
  sh->owner_pid = getpid();
  sh->pd_id = pd->id;
  sh->rq_cap = ia->attr.max_wr;
  sh->rq_sge = srq->max_sge;
  shared_mutex_init(&sh->mu);
  sh->magic = wire::kSrqMagic;
  srq->shell.owner = srq;
  ibv_srq& s = srq->shell.ibv;
  s.context = pd->ctx->ibv();
  s.srq_context = ia->srq_context;
  s.pd = p;
  pthread_mutex_init(&s.mutex, nullptr);
  pthread_cond_init(&s.cond, nullptr);
  pd->children++;
  pd->ctx->children++;
  return &s;
}

FV_EXPORT int ibv_destroy_srq(ibv_srq* s) {
  Srq* srq = owner_of<Srq>(s);
  if (!srq) return fail(EINVAL);
  if (srq->users.load() > 0) return fail(EBUSY);
  {
    SharedLock lk(&srq->sh->mu);
    srq->sh->magic = wire::kDeadMagic;
  }
  Pd* pd = srq->pd;
  srq->ctx->children--;
  delete srq;
  pd->children--;
  return 0;
}

FV_EXPORT ibv_ah* ibv_create_ah(ibv_pd* p, ibv_ah_attr* attr) {
  Pd* pd = owner_of<Pd>(p);
  if (!pd || !attr || attr->port_num != 1 || (pd->ctx->dev->roce && !attr->is_global) ||
      (!pd->ctx->dev->roce && (attr->dlid == 0 || attr->dlid >= 0xc000))) {
    log_error("ibv_create_ah: null PD, port_num not 1, or no route (RoCE needs is_global, "
              "InfiniBand a unicast dlid) (EINVAL)");
    errno = EINVAL;
    return nullptr;
  }
  auto* ah = new Ah;
  ah->dest_key = dest_key_of(*pd->ctx->dev, *attr);
  ah->shell.owner = ah;
  ah->shell.ibv.context = pd->ctx->ibv();
  ah->shell.ibv.pd = p;
  pd->children++;
  return &ah->shell.ibv;
}

FV_EXPORT int ibv_destroy_ah(ibv_ah* a) {
  Ah* ah = owner_of<Ah>(a);
  if (!ah) return fail(EINVAL);
  Pd* pd = owner_of<Pd>(a->pd);
  delete ah;
  pd->children--;
  return 0;
}

FV_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* q) {
  Qp* qp = owner_of<Qp>(q);
  return qp ? &qp->shell.ex : nullptr;
}

FV_EXPORT mlx5dv_qp_ex* fakeverbs_dv_qp_ex(ibv_qp_ex* x) {
  return x ? &reinterpret_cast<QpShell*>(x)->dv : nullptr;
}

FV_EXPORT ibv_qp* fakeverbs_dc_create_qp(ibv_context*, ibv_qp_init_attr_ex* ia,
                                         mlx5dv_qp_init_attr* dv) {
  const char* why = check_dc_attr(ia, dv);
  Pd* pd = why ? nullptr : owner_of<Pd>(ia->pd);
  Cq* scq = pd ? owner_of<Cq>(ia->send_cq) : nullptr;
  Cq* rcq = pd ? owner_of<Cq>(ia->recv_cq) : nullptr;
  Srq* srq = pd && ia->srq ? owner_of<Srq>(ia->srq) : nullptr;
  if (!why && (scq->ctx != pd->ctx || rcq->ctx != pd->ctx)) why = "CQ from another context";
  if (!why && srq && srq->pd != pd) why = "SRQ of another PD";
  if (why) {
    log_error("mlx5dv_create_qp: %s (EINVAL)", why);
    errno = EINVAL;
    return nullptr;
  }
  const int type = int(dv->dc_init_attr.dc_type);
  grant_inline(ia->cap);  // written back, as ibv_create_qp does
  ibv_qp_cap cap = ia->cap;
  cap.max_recv_wr = 0;  // a DCT receives through its SRQ; a DCI has no RQ
  Qp* qp = make_qp(pd, scq, rcq, cap, ia->sq_sig_all != 0, ia->qp_context, IBV_QPT_DRIVER);
  if (!qp) return nullptr;
  qp->dc_type = type;
  {
    SharedLock lk(&qp->sh->mu);
    qp->sh->dc_type = uint32_t(type);
    if (type == MLX5DV_DCTYPE_DCT) {
      qp->dc_key = qp->sh->dc_key = dv->dc_init_attr.dct_access_key;
      snprintf(qp->sh->srq, sizeof qp->sh->srq, "%s", srq->file.name().c_str());
    }
  }
  if (srq) {
    qp->srq = srq;
    srq->users++;
  }
  if (type == MLX5DV_DCTYPE_DCI) set_dci_ops(qp, ia->send_ops_flags);
  return &qp->shell.ibv;
}
