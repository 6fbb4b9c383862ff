#include "core/mlx5/async_events.h"

#include <fcntl.h>

namespace mlxa2a::mlx5 {

const char* async_event_name(ibv_event_type t) noexcept {
  switch (t) {
    case IBV_EVENT_CQ_ERR: return "IBV_EVENT_CQ_ERR";
    case IBV_EVENT_QP_FATAL: return "IBV_EVENT_QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR: return "IBV_EVENT_QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR: return "IBV_EVENT_QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST: return "IBV_EVENT_COMM_EST";
    case IBV_EVENT_SQ_DRAINED: return "IBV_EVENT_SQ_DRAINED";
    case IBV_EVENT_PATH_MIG: return "IBV_EVENT_PATH_MIG";
    case IBV_EVENT_PATH_MIG_ERR: return "IBV_EVENT_PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL: return "IBV_EVENT_DEVICE_FATAL";
    case IBV_EVENT_PORT_ACTIVE: return "IBV_EVENT_PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR: return "IBV_EVENT_PORT_ERR";
    case IBV_EVENT_LID_CHANGE: return "IBV_EVENT_LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE: return "IBV_EVENT_PKEY_CHANGE";
    case IBV_EVENT_SM_CHANGE: return "IBV_EVENT_SM_CHANGE";
    case IBV_EVENT_SRQ_ERR: return "IBV_EVENT_SRQ_ERR";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "IBV_EVENT_SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "IBV_EVENT_QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER: return "IBV_EVENT_CLIENT_REREGISTER";
    case IBV_EVENT_GID_CHANGE: return "IBV_EVENT_GID_CHANGE";
    case IBV_EVENT_WQ_FATAL: return "IBV_EVENT_WQ_FATAL";
    default: break;
  }
  return "IBV_EVENT_(unknown)";
}

bool make_nonblocking(ibv_context* ctx) noexcept {
  const int fl = fcntl(ctx->async_fd, F_GETFL);
  return fl >= 0 && fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

bool next_async_event(const Verbs& v, ibv_context* ctx, AsyncEvent* out) noexcept {
  if (!v.get_async_event || !v.ack_async_event) return false;
  ibv_async_event ev{};
  if (v.get_async_event(ctx, &ev) != 0) return false;  // EAGAIN: none pending
  *out = AsyncEvent{};
  out->name = async_event_name(ev.event_type);
  switch (ev.event_type) {
    // Affiliated with one QP: it is in the error state (IB spec 11.6.3).
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      out->scope = AsyncEvent::Scope::qp;
      out->qpn = ev.element.qp ? ev.element.qp->qp_num : 0;
      break;
    // Unaffiliated, naming a port (man ibv_get_async_event). A port that
    // went down does not fail its RC QPs: they retry, and survive a flap
    // shorter than their retry budget.
    case IBV_EVENT_PORT_ERR:
      out->scope = AsyncEvent::Scope::port;
      out->port = static_cast<std::uint8_t>(ev.element.port_num);
      break;
    case IBV_EVENT_PORT_ACTIVE:
      out->scope = AsyncEvent::Scope::port_up;
      out->port = static_cast<std::uint8_t>(ev.element.port_num);
      break;
    // The port's address or partition changed, or a new SM may have
    // reassigned them: the cached LID/GID/P_Key index may be stale.
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
      out->scope = AsyncEvent::Scope::address;
      out->port = static_cast<std::uint8_t>(ev.element.port_num);
      break;
    // A CQ in error has lost completions for good (overrun); a fatal device
    // error ends every verbs object of the context.
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_DEVICE_FATAL:
      out->scope = AsyncEvent::Scope::device;
      break;
    default:
      break;
  }
  v.ack_async_event(&ev);
  return true;
}

}  // namespace mlxa2a::mlx5
