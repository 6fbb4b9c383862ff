// fakeverbs: RC queue pairs -- creation, the RESET->INIT->RTR->RTS state
// machine with the attribute rules of the IB spec (o10-2.2 / the kernel's
// qp_state_table), query and destruction.
#include <algorithm>
#include <unistd.h>

#include <cstring>

#include "execute.h"
#include "fault.h"
#include "hca.h"
#include "objects.h"
#include "port.h"

namespace fakeverbs {

bool port_gid(const DeviceSpec& d, int index, ibv_gid* gid, ibv_gid_type* type);  // device.cc
void release_pins(std::vector<MrRef>& pins);                                         // post.cc

ibv_qp_state Qp::state() const {
  SharedLock lk(&sh->mu);
  return ibv_qp_state(sh->state);
}

void Qp::set_state(ibv_qp_state s) {
  SharedLock lk(&sh->mu);
  sh->state = s;
  shell.ibv.state = s;
}

namespace {

constexpr int kInitReq = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kInitOpt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrReq = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtrOpt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
constexpr int kRtsReq = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                        IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
constexpr int kRtsOpt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                        IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

// Returns false if `mask` is not allowed for cur -> next on an RC QP.
bool transition_ok(ibv_qp_state cur, ibv_qp_state next, int mask) {
  auto exact = [mask](int req, int opt) { return (mask & req) == req && !(mask & ~(req | opt)); };
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return exact(IBV_QP_STATE, 0);
  switch (cur) {
    case IBV_QPS_RESET:
      return next == IBV_QPS_INIT && exact(kInitReq, 0);
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) return exact(0, IBV_QP_STATE | kInitOpt);
      return next == IBV_QPS_RTR && exact(kRtrReq, kRtrOpt);
    case IBV_QPS_RTR:
      return next == IBV_QPS_RTS && exact(kRtsReq, kRtsOpt);
    case IBV_QPS_RTS:
      return next == IBV_QPS_RTS &&
             exact(0, IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
                          IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER);
    default:
      return false;  // SQD, SQE: not modelled; ERR only to RESET/ERR
  }
}

const char* state_name(ibv_qp_state s) {
  static const char* n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return unsigned(s) < 7 ? n[s] : "?";
}

// Value checks; returns an error message or nullptr.
const char* check_values(const Qp& qp, const ibv_qp_attr& a, int mask) {
  const DeviceSpec& d = *qp.ctx->dev;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index >= d.pkey_table_len())
    return "pkey_index out of the P_Key table";
  // An empty entry (partition 0) names no partition: the HCA refuses it.
  if ((mask & IBV_QP_PKEY_INDEX) && (d.pkey_at(a.pkey_index) & 0x7fff) == 0)
    return "pkey_index names an empty P_Key table entry";
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return "port_num must be 1";
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (a.qp_access_flags & ~unsigned(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
    return "unknown qp_access_flags";
  if (mask & IBV_QP_PATH_MTU) {
    ibv_mtu active = d.roce ? IBV_MTU_1024 : IBV_MTU_4096;
    if (a.path_mtu < IBV_MTU_256 || a.path_mtu > active) return "path_mtu above the port's active_mtu";
  }
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > 0xffffff) return "dest_qp_num > 24 bits";
  if ((mask & IBV_QP_RQ_PSN) && a.rq_psn > 0xffffff) return "rq_psn > 24 bits";
  if ((mask & IBV_QP_SQ_PSN) && a.sq_psn > 0xffffff) return "sq_psn > 24 bits";
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > limits().max_rd_atom)
    return "max_dest_rd_atomic above max_qp_rd_atom";
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > limits().max_rd_atom)
    return "max_rd_atomic above max_qp_init_rd_atom";
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return "min_rnr_timer > 31";
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return "timeout > 31";
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return "retry_cnt > 7";
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return "rnr_retry > 7";
  if ((mask & IBV_QP_CUR_STATE) && a.cur_qp_state != qp.shell.ibv.state)
    return "cur_qp_state does not match the QP's state";
  if ((mask & IBV_QP_AV) && qp.dc_type) {
    // A DC QP's address vector names its own port only: destinations come
    // with each work request (a DCI's) or not at all (a DCT's).
    if (a.ah_attr.port_num != 1) return "ah_attr.port_num must be 1";
  } else if (mask & IBV_QP_AV) {
    const ibv_ah_attr& ah = a.ah_attr;
    if (ah.port_num != 1) return "ah_attr.port_num must be 1";
    if (d.roce) {
      // RoCE has no LIDs: every packet carries a GRH (man ibv_modify_qp).
      ibv_gid g;
      ibv_gid_type t;
      if (!ah.is_global) return "RoCE port needs ah_attr.is_global = 1";
      if (!port_gid(d, ah.grh.sgid_index, &g, &t)) return "ah_attr.grh.sgid_index is not a valid GID";
      static const ibv_gid zero{};
      if (!memcmp(&ah.grh.dgid, &zero, sizeof zero)) return "ah_attr.grh.dgid is zero";
    } else {
      if (ah.dlid == 0 || ah.dlid >= 0xc000) return "ah_attr.dlid is not a unicast LID";
      if (ah.is_global && ah.grh.sgid_index != 0) return "ah_attr.grh.sgid_index is not a valid GID";
    }
  }
  return nullptr;
}

std::atomic<uint32_t> g_qp_seq{0};

}  // namespace

// The key of the port an address vector names. RoCE: the dgid may be any
// GID of the peer's table (its links, device.cc publish_gids); a dgid outside
// the source GID's subnet is not routed - the key names nobody, so packets
// are dropped and retried until the retry count runs out, as on a fabric.
std::string dest_key_of(const DeviceSpec& d, const ibv_ah_attr& ah) {
  if (!d.roce) return address_key(false, ah.dlid, port::gid(d, d.gid));  // in our subnet
  const std::string own = address_key(true, 0, ah.grh.dgid);
  const size_t s = ah.grh.sgid_index;
  if (s < d.gids.size() && !same_subnet(d.gids[s].gid, ah.grh.dgid, d.gids[s].prefix)) {
    log_error("GID index %zu cannot reach the destination GID (another subnet): not routed", s);
    return "unroutable." + own;
  }
  const std::string target = resolve_link("gid." + own);
  const size_t at = target.find(".port.");
  return at == std::string::npos ? own : target.substr(at + 6);
}

namespace {

// FAKEVERBS_FAULT resp_error: every QP of ours in RTS fails as a responder
// would, with nothing on our send side (fault.h).
void responder_errors(Context& ctx) {
  std::lock_guard<std::mutex> g(ctx.mu);
  for (auto& [qpn, qp] : ctx.qps) {
    if (qp->state() != IBV_QPS_RTS) continue;
    log_error("FAKEVERBS_FAULT: QP 0x%x fails as a responder (IBV_EVENT_QP_ACCESS_ERR)", qpn);
    responder_error(qp->sh, qp->recv_cq ? qp->recv_cq->ring : nullptr, IBV_EVENT_QP_ACCESS_ERR);
  }
}

}  // namespace

// The QP object every kind shares (RC here, DC in dc.cc): its shared file,
// its QPN claimed on the port, RESET. nullptr with errno on failure.
void grant_inline(ibv_qp_cap& cap) {
  // Like mlx5, the inline size granted is what the send WQE holds once
  // rounded up to 64-byte blocks (and the WQE must hold the SGEs too), at
  // most the limit; ibv_create_qp writes it back (man ibv_create_qp).
  if (cap.max_inline_data > 0) {
    constexpr uint32_t kOverhead = 48, kInlineHeader = 4, kBlock = 64, kSge = 16;
    const uint32_t inl = kOverhead + kInlineHeader + cap.max_inline_data;
    const uint32_t sges = kOverhead + kSge * cap.max_send_sge;
    const uint32_t wqe = ((inl > sges ? inl : sges) + kBlock - 1) / kBlock * kBlock;
    cap.max_inline_data = std::min(wqe - kOverhead - kInlineHeader, limits().max_inline);
  }
}

Qp* make_qp(Pd* pd, Cq* scq, Cq* rcq, const ibv_qp_cap& cap, bool sig_all, void* qp_context,
            ibv_qp_type type) {
  wire::MrTable* mrt = own_mr_table();
  if (!mrt) {
    errno = ENOMEM;
    return nullptr;
  }
  Context* ctx = pd->ctx;
  auto* qp = new Qp;
  qp->ctx = ctx;
  qp->pd = pd;
  qp->send_cq = scq;
  qp->recv_cq = rcq;
  qp->cap = cap;
  qp->sq_sig_all = sig_all;
  uint32_t rq_sge = cap.max_recv_sge ? cap.max_recv_sge : 1;
  const uint32_t seq = ++g_qp_seq;
  // Its own random stream (jitter, placement order): QPs are independent and
  // a run replays from FAKEVERBS_SEED (hca.h).
  qp->rng = hca::stream_seed(seq);
  qp->fault_rng = hca::stream_seed(uint64_t(seq) << 32 | 0xfa);
  std::string name = std::to_string(getpid()) + ".qp." + std::to_string(seq);
  size_t size = sizeof(wire::QpShared) +
                cap.max_recv_wr * (sizeof(wire::RecvWqe) + rq_sge * sizeof(ibv_sge));
  if (!qp->file.create(name, size)) {
    int e = errno;
    delete qp;
    errno = e;
    return nullptr;
  }
  wire::QpShared* sh = qp->sh = static_cast<wire::QpShared*>(qp->file.data());
  sh->owner_pid = getpid();
  sh->pd_id = pd->id;
  sh->state = IBV_QPS_RESET;
  sh->rq_cap = cap.max_recv_wr;
  sh->rq_sge = rq_sge;
  std::string key = ctx->dev->address_key();
  sh->port_down_until = port::down_until(*ctx->dev);
  snprintf(sh->local_key, sizeof sh->local_key, "%s", key.c_str());
  snprintf(sh->recv_cq, sizeof sh->recv_cq, "%s", rcq->file.name().c_str());
  // Responders check keys in, and write into the memory of, the process whose
  // table holds the PD's MRs (the PD's owner when it is imported).
  snprintf(sh->mr_table, sizeof sh->mr_table, "%d.mr", int(pd->mr_table()->owner_pid));
  shared_mutex_init(&sh->mu);
  // QPNs are unique per port across all processes of the job: claim one by
  // publishing its rendezvous link (atomic symlink creation).
  uint32_t qpn = ((uint32_t(getpid()) * 977u) + seq * 31u) & 0xffffff;
  for (int tries = 0;; ++tries, qpn = (qpn + 1) & 0xffffff) {
    if (qpn < 2) continue;  // QP0/QP1 are special
    std::string link = "qpn." + key + "." + std::to_string(qpn);
    if (publish_link(link, name)) {
      qp->link = link;
      break;
    }
    if (errno != EEXIST || tries > 4096) {
      log_error("ibv_create_qp: cannot publish %s: %s", link.c_str(), strerror(errno));
      delete qp;
      errno = ENOMEM;
      return nullptr;
    }
  }
  sh->qpn = qpn;
  sh->magic = wire::kQpMagic;
  qp->shell.owner = qp;
  ibv_qp& q = qp->shell.ibv;
  q.context = ctx->ibv();
  q.qp_context = qp_context;
  q.pd = &pd->shell.ibv;
  q.send_cq = &scq->shell.ibv;
  q.recv_cq = &rcq->shell.ibv;
  q.handle = qpn;
  q.qp_num = qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  qp->attr.qp_state = IBV_QPS_RESET;
  qp->attr.cap = qp->cap;
  pd->children++;
  scq->users++;
  rcq->users++;
  ctx->children++;
  {
    std::lock_guard<std::mutex> g(ctx->mu);
    ctx->qps[qpn] = qp;
  }
  return qp;
}

}  // namespace fakeverbs

using namespace fakeverbs;

FV_EXPORT ibv_qp* ibv_create_qp(ibv_pd* p, ibv_qp_init_attr* ia) {
  Pd* pd = owner_of<Pd>(p);
  Cq* scq = ia ? owner_of<Cq>(ia->send_cq) : nullptr;
  Cq* rcq = ia ? owner_of<Cq>(ia->recv_cq) : nullptr;
  const char* why = nullptr;
  int err = EINVAL;
  if (!pd || !ia) why = "null PD or attributes";
  else if (ia->qp_type != IBV_QPT_RC) why = "only RC QPs are modelled", err = EOPNOTSUPP;
  else if (!scq || !rcq) why = "send_cq and recv_cq are required";
  else if (scq->ctx != pd->ctx || rcq->ctx != pd->ctx) why = "CQ from another context";
  else if (ia->srq) why = "SRQ is not modelled", err = EOPNOTSUPP;
  else if (ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > uint32_t(limits().max_qp_wr) ||
           ia->cap.max_recv_wr > uint32_t(limits().max_qp_wr))
    why = "max_send_wr/max_recv_wr outside 1..max_qp_wr";
  else if (ia->cap.max_send_sge > uint32_t(limits().max_sge) ||
           ia->cap.max_recv_sge > uint32_t(limits().max_sge))
    why = "max_send_sge/max_recv_sge above max_sge";
  else if (ia->cap.max_inline_data > limits().max_inline) why = "max_inline_data above the limit";
  if (why) {
    log_error("ibv_create_qp: %s", why);
    errno = err;
    return nullptr;
  }
  grant_inline(ia->cap);
  Qp* qp = make_qp(pd, scq, rcq, ia->cap, ia->sq_sig_all != 0, ia->qp_context, IBV_QPT_RC);
  return qp ? &qp->shell.ibv : nullptr;
}

FV_EXPORT int ibv_modify_qp(ibv_qp* q, ibv_qp_attr* a, int mask) {
  Qp* qp = owner_of<Qp>(q);
  if (!qp || !a) return fail(EINVAL);
  std::lock_guard<std::mutex> g(qp->mu);
  ibv_qp_state cur = qp->state();
  ibv_qp_state next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
  const bool allowed = qp->dc_type ? dc_transition_ok(qp->dc_type, cur, next, mask)
                                    : transition_ok(cur, next, mask);
  if (!allowed) {
    log_error("ibv_modify_qp: QP 0x%x %s->%s with attr_mask 0x%x is invalid (EINVAL)",
              qp->qpn(), state_name(cur), state_name(next), unsigned(mask));
    return fail(EINVAL);
  }
  if (const char* why = check_values(*qp, *a, mask)) {
    log_error("ibv_modify_qp: QP 0x%x %s->%s: %s (EINVAL)", qp->qpn(), state_name(cur),
              state_name(next), why);
    return fail(EINVAL);
  }
  ibv_qp_attr& s = qp->attr;
  if (mask & IBV_QP_PKEY_INDEX) s.pkey_index = a->pkey_index;
  if (mask & IBV_QP_PORT) s.port_num = a->port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) s.qp_access_flags = a->qp_access_flags;
  if (mask & IBV_QP_AV) s.ah_attr = a->ah_attr;
  if (mask & IBV_QP_PATH_MTU) s.path_mtu = a->path_mtu;
  if (mask & IBV_QP_DEST_QPN) s.dest_qp_num = a->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) s.rq_psn = a->rq_psn;
  if (mask & IBV_QP_SQ_PSN) s.sq_psn = a->sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = a->max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s.max_rd_atomic = a->max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) s.min_rnr_timer = a->min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) s.timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT) s.retry_cnt = a->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) s.rnr_retry = a->rnr_retry;
  s.qp_state = next;
  wire::QpShared* sh = qp->sh;
  {
    SharedLock lk(&sh->mu);
    if (mask & IBV_QP_ACCESS_FLAGS) sh->access_flags = a->qp_access_flags;
    if (mask & IBV_QP_MIN_RNR_TIMER) sh->min_rnr_timer = a->min_rnr_timer;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) sh->max_dest_rd_atomic = a->max_dest_rd_atomic;
    if (mask & IBV_QP_DEST_QPN) sh->dest_qpn = a->dest_qp_num;
    if ((mask & IBV_QP_AV) && !qp->dc_type) {
      const ibv_ah_attr& ah = a->ah_attr;
      std::string k = dest_key_of(*qp->ctx->dev, ah);
      snprintf(sh->dest_key, sizeof sh->dest_key, "%s", k.c_str());
    }
    if (next == IBV_QPS_RESET) sh->rq_head = sh->rq_tail;
    sh->state = next;
    q->state = next;
  }
  if (next == IBV_QPS_RESET) {
    for (SendWr& w : qp->sq) release_pins(w.pinned);
    qp->sq.clear();
    drop_executed(*qp);
    for (auto& grp : qp->groups) release_pins(grp.pins);
    qp->groups.clear();
    release_pins(qp->open_pins);
    qp->open_count = 0;
    qp->sq_used = 0;
    qp->last_due_ns = 0;
    qp->peer_qp_file.reset();
    qp->peer_cq_file.reset();
    qp->peer_mr_file.reset();
  } else if (next == IBV_QPS_ERR) {
    flush_recv_queue(sh, qp->recv_cq->ring);
    progress(*qp);  // flushes the send queue (no data moves in ERR)
    hca::kick();    // ... or the thread does, once earlier completions are out
  }
  return 0;
}

FV_EXPORT int ibv_query_qp(ibv_qp* q, ibv_qp_attr* a, int, ibv_qp_init_attr* ia) {
  Qp* qp = owner_of<Qp>(q);
  if (!qp || !a || !ia) return fail(EINVAL);
  if (fault::resp_error_now()) responder_errors(*qp->ctx);  // before qp->mu (lock order)
  std::lock_guard<std::mutex> g(qp->mu);
  *a = qp->attr;
  a->qp_state = a->cur_qp_state = qp->state();
  a->cap = qp->cap;
  memset(ia, 0, sizeof *ia);
  ia->qp_context = q->qp_context;
  ia->send_cq = q->send_cq;
  ia->recv_cq = q->recv_cq;
  ia->cap = qp->cap;
  ia->qp_type = IBV_QPT_RC;
  ia->sq_sig_all = qp->sq_sig_all;
  return 0;
}

FV_EXPORT int ibv_destroy_qp(ibv_qp* q) {
  Qp* qp = owner_of<Qp>(q);
  if (!qp) return fail(EINVAL);
  {
    std::lock_guard<std::mutex> g(qp->ctx->mu);
    qp->ctx->qps.erase(qp->qpn());
  }
  {
    SharedLock lk(&qp->sh->mu);
    qp->sh->state = IBV_QPS_RESET;
    qp->sh->magic = wire::kDeadMagic;
  }
  remove_entry(qp->link);
  for (SendWr& w : qp->sq) release_pins(w.pinned);
  drop_executed(*qp);
  for (auto& grp : qp->groups) release_pins(grp.pins);
  release_pins(qp->open_pins);
  Pd* pd = qp->pd;
  if (qp->srq) qp->srq->users--;
  qp->send_cq->users--;
  qp->recv_cq->users--;
  qp->ctx->children--;
  delete qp;
  pd_child_gone(pd);
  return 0;
}
