// fakeverbs: completion channels -- ibv_req_notify_cq, ibv_get_cq_event,
// ibv_ack_cq_events (man ibv_req_notify_cq, ibv_get_cq_event).
//
// A CQ's entries may be appended by a peer process, which cannot signal our
// descriptors; so the process's hca thread watches every armed CQ's ring and,
// when an entry that satisfies the arming arrives, disarms the CQ and queues
// the event on its channel (an eventfd, readable while events are queued, so
// programs may poll() it).  Latency: at most the thread's retry period.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "hca.h"
#include "objects.h"

namespace fakeverbs {

int req_notify_cq_op(ibv_cq* c, int solicited_only) {
  Cq* cq = owner_of<Cq>(c);
  if (!cq) return fail(EINVAL);
  if (!cq->channel) {
    // man ibv_req_notify_cq: events go to the CQ's completion channel; a CQ
    // created without one can never deliver them.
    log_error("ibv_req_notify_cq: CQ %p has no completion channel (EINVAL)",
              static_cast<void*>(c));
    return fail(EINVAL);
  }
  {
    SharedLock lk(&cq->ring->mu);
    std::lock_guard<std::mutex> g(cq->arm_mu);
    cq->armed = true;
    cq->solicited_only = solicited_only != 0;
    cq->armed_tail = cq->ring->tail;
  }
  hca::kick();
  return 0;
}

// Caller holds ctx.mu (the hca thread).  kBlocked while a CQ stays armed.
uint64_t check_armed(Context& ctx) {
  bool armed_left = false;
  for (Cq* cq : ctx.channel_cqs) {
    wire::CqRing* r = cq->ring;
    SharedLock lk(&r->mu);
    std::lock_guard<std::mutex> g(cq->arm_mu);
    if (!cq->armed) continue;
    bool fire = false;
    const uint64_t from = std::max(cq->armed_tail, r->tail > r->capacity ? r->tail - r->capacity : 0);
    for (uint64_t i = from; i < r->tail && !fire; ++i) {
      const wire::Cqe& e = r->entries()[i % r->capacity];
      fire = !cq->solicited_only || e.solicited || e.status != IBV_WC_SUCCESS;
    }
    if (r->overflowed) fire = true;
    if (!fire) {
      armed_left = true;
      continue;
    }
    cq->armed = false;
    cq->unacked++;
    Channel* ch = cq->channel;
    std::lock_guard<std::mutex> q(ch->mu);
    ch->events.push_back(cq);
    uint64_t one = 1;
    if (write(ch->shell.ibv.fd, &one, sizeof one) != sizeof one)
      log_error("completion event lost: %s", strerror(errno));
  }
  return armed_left ? kBlocked : UINT64_MAX;
}

}  // namespace fakeverbs

using namespace fakeverbs;

FV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  Context* ctx = Context::from(c);
  if (!ctx) {
    errno = EINVAL;
    return nullptr;
  }
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* ch = new Channel;
  ch->ctx = ctx;
  ch->shell.owner = ch;
  ch->shell.ibv.context = c;
  ch->shell.ibv.fd = fd;
  ch->shell.ibv.refcnt = 0;
  ctx->children++;
  return &ch->shell.ibv;
}

FV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* c) {
  Channel* ch = owner_of<Channel>(c);
  if (!ch) return fail(EINVAL);
  if (ch->cqs.load() != 0) {
    log_error("ibv_destroy_comp_channel: %d CQ(s) still use it (EBUSY)", ch->cqs.load());
    return fail(EBUSY);
  }
  close(c->fd);
  ch->ctx->children--;
  delete ch;
  return 0;
}

// man ibv_get_cq_event: blocks (unless the channel fd is non-blocking) until
// a completion event; every event must be acknowledged (ibv_ack_cq_events)
// before the CQ is destroyed.
FV_EXPORT int ibv_get_cq_event(ibv_comp_channel* c, ibv_cq** cq_out, void** cq_context) {
  Channel* ch = owner_of<Channel>(c);
  if (!ch) return fail(EINVAL), -1;
  uint64_t v;
  if (read(c->fd, &v, sizeof v) != sizeof v) return -1;  // errno from read (EAGAIN)
  std::lock_guard<std::mutex> g(ch->mu);
  if (ch->events.empty()) return fail(EAGAIN), -1;
  Cq* cq = ch->events.front();
  ch->events.pop_front();
  *cq_out = &cq->shell.ibv;
  *cq_context = cq->shell.ibv.cq_context;
  return 0;
}

FV_EXPORT void ibv_ack_cq_events(ibv_cq* c, unsigned int nevents) {
  Cq* cq = owner_of<Cq>(c);
  if (!cq) return;
  std::lock_guard<std::mutex> g(cq->arm_mu);
  if (nevents > cq->unacked) {
    log_error("ibv_ack_cq_events(%p, %u): only %u events were delivered", static_cast<void*>(c),
              nevents, cq->unacked);
    nevents = cq->unacked;
  }
  cq->unacked -= nevents;
}
