// fakeverbs: completion queues.
//
// A CQ is a ring in a shared file so that a peer process can deliver the
// receive-side completions (SEND, RDMA_WRITE_WITH_IMM) of the RDMA
// operations it executes.  The peer writes the data first and appends the
// CQE afterwards under the ring mutex, so a completion is never visible
// before its data.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "fault.h"
#include "objects.h"

namespace fakeverbs {

void retire_send_cqe(Context& ctx, uint32_t qpn, uint32_t seq);  // post.cc


bool cq_push(wire::CqRing* ring, const wire::Cqe& e) {
  SharedLock lk(&ring->mu);
  if (ring->overflowed || ring->tail - ring->head >= ring->capacity) {
    ring->overflowed = 1;
    return false;
  }
  ring->entries()[ring->tail % ring->capacity] = e;
  ring->tail++;
  return true;
}

int poll_cq_op(ibv_cq* c, int n, ibv_wc* wc) {
  Cq* cq = owner_of<Cq>(c);
  if (!cq || n < 0) return -EINVAL;
  // Work requests progress on the hca thread; polling only collects what
  // it (or a peer) completed, and delivers events peers raised.
  deliver_events(*cq->ctx);
  wire::CqRing* r = cq->ring;
  // Completions this process's polls delivered (cq_overrun counts them).
  static std::atomic<uint64_t> delivered{0};
  if (fault::cq_overrun_now(delivered.load(std::memory_order_relaxed))) {
    SharedLock lk(&r->mu);
    r->overflowed = true;
  }
  int got = 0;
  wire::Cqe batch[64];
  while (got < n) {
    int k = 0;
    bool overflowed;
    {
      SharedLock lk(&r->mu);
      overflowed = r->overflowed;
      while (k < 64 && got + k < n && r->head != r->tail)
        batch[k++] = r->entries()[r->head++ % r->capacity];
    }
    if (overflowed && !cq->overflow_reported) {
      // CQ overrun: the CQ is in error and the lost completions cannot be
      // recovered (IB spec 11.4.2.1 "CQ overrun"). mlx5 says so only by the
      // affiliated async event; ibv_poll_cq goes on returning what was
      // written before (and nothing after).
      cq->overflow_reported = true;
      log_error("CQ %p overrun: more completions than its %u entries (IBV_EVENT_CQ_ERR)",
                static_cast<void*>(c), r->capacity);
      ibv_async_event ev{};
      ev.element.cq = c;
      ev.event_type = IBV_EVENT_CQ_ERR;
      cq->ctx->push_async(ev);
    }
    for (int i = 0; i < k; ++i) {
      const wire::Cqe& e = batch[i];
      ibv_wc& w = wc[got + i];
      memset(&w, 0, sizeof w);
      w.wr_id = e.wr_id;
      w.status = ibv_wc_status(e.status);
      w.opcode = ibv_wc_opcode(e.opcode);
      w.vendor_err = e.vendor_err;
      w.byte_len = e.byte_len;
      w.imm_data = e.imm_data;
      w.qp_num = e.qp_num;
      w.src_qp = e.src_qp;
      w.wc_flags = e.wc_flags;
      if (e.retire) retire_send_cqe(*cq->ctx, e.qp_num, e.retire);
    }
    got += k;
    if (k < 64) break;
  }
  delivered.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
  return got;
}

}  // namespace fakeverbs

using namespace fakeverbs;

namespace {
std::atomic<uint32_t> g_cq_seq{0};

// mlx5 rounds the ring up to a power of two and reports one less.
uint32_t ring_size(int cqe) {
  uint32_t cap = 1;
  while (cap < uint32_t(cqe) + 1) cap <<= 1;
  return cap;
}
}  // namespace

FV_EXPORT ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_context,
                                ibv_comp_channel* channel, int comp_vector) {
  Context* ctx = Context::from(c);
  if (!ctx || cqe < 1 || cqe > limits().max_cqe || comp_vector < 0 ||
      comp_vector >= c->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  Channel* ch = owner_of<Channel>(channel);
  if (channel && ch->ctx != ctx) {
    errno = EINVAL;
    return nullptr;
  }
  const uint32_t cap = ring_size(cqe);
  auto* cq = new Cq;
  cq->ctx = ctx;
  std::string name = std::to_string(getpid()) + ".cq." + std::to_string(++g_cq_seq);
  // The file has room for the largest ring ibv_resize_cq may make (sparse:
  // pages cost nothing until used), so peers that mapped it never remap.
  const uint32_t reserve = ring_size(limits().max_cqe) - 1;
  if (!cq->file.create(name, sizeof(wire::CqRing) + sizeof(wire::Cqe) * reserve)) {
    int e = errno;
    delete cq;
    errno = e;
    return nullptr;
  }
  cq->ring = static_cast<wire::CqRing*>(cq->file.data());
  cq->ring->owner_pid = getpid();
  cq->ring->capacity = cap - 1;
  shared_mutex_init(&cq->ring->mu);
  cq->ring->magic = wire::kCqMagic;
  cq->shell.owner = cq;
  ibv_cq& q = cq->shell.ibv;
  q.context = c;
  q.cq_context = cq_context;
  q.cqe = int(cap - 1);
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  ctx->children++;
  if (ch) {
    cq->channel = ch;
    q.channel = channel;
    ch->cqs++;
    std::lock_guard<std::mutex> g(ctx->mu);
    ctx->channel_cqs.push_back(cq);
  }
  return &q;
}

// man ibv_resize_cq: the new size must hold the completions now in the CQ
// and stay within max_cqe; cq->cqe says what was granted. The live entries
// keep their order; peers see the new capacity at their next push.
FV_EXPORT int ibv_resize_cq(ibv_cq* c, int cqe) {
  Cq* cq = owner_of<Cq>(c);
  if (!cq || cqe < 1 || cqe > limits().max_cqe) return EINVAL;
  const uint32_t cap = ring_size(cqe);
  wire::CqRing* r = cq->ring;
  SharedLock lk(&r->mu);
  const uint64_t used = r->tail - r->head;
  if (used > cap - 1) {
    log_error("ibv_resize_cq: %llu completions do not fit %u entries (EINVAL)",
              (unsigned long long)used, cap - 1);
    return EINVAL;
  }
  std::vector<wire::Cqe> live(used);
  for (uint64_t i = 0; i < used; ++i) live[i] = r->entries()[(r->head + i) % r->capacity];
  r->capacity = cap - 1;
  for (uint64_t i = 0; i < used; ++i) r->entries()[(r->head + i) % r->capacity] = live[i];
  c->cqe = int(cap - 1);
  return 0;
}

FV_EXPORT int ibv_destroy_cq(ibv_cq* c) {
  Cq* cq = owner_of<Cq>(c);
  if (!cq) return fail(EINVAL);
  if (cq->users.load() != 0) {
    log_error("ibv_destroy_cq: CQ still used by %d QP(s) (EBUSY)", cq->users.load());
    return fail(EBUSY);
  }
  if (cq->channel) {
    std::lock_guard<std::mutex> g(cq->arm_mu);
    if (cq->unacked) {
      // rdma-core would block here forever; say why instead (man ibv_get_cq_event).
      log_error("ibv_destroy_cq: %u completion event(s) not acknowledged (EBUSY)", cq->unacked);
      return fail(EBUSY);
    }
  }
  if (Channel* ch = cq->channel) {
    std::lock_guard<std::mutex> g(cq->ctx->mu);
    auto& v = cq->ctx->channel_cqs;
    v.erase(std::remove(v.begin(), v.end(), cq), v.end());
    ch->cqs--;
  }
  cq->ring->magic = wire::kDeadMagic;
  cq->ctx->children--;
  delete cq;
  return 0;
}
