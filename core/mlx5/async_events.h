// The device's asynchronous events (man ibv_get_async_event): what each
// means for the endpoint pool, read without blocking.
//
// Contract
// * make_nonblocking() sets O_NONBLOCK on the context's async_fd (the
//   documented way to poll it, man ibv_get_async_event); false if it cannot.
// * next_async_event() reads one pending event, acknowledges it at once
//   (every ibv_get_async_event needs its ibv_ack_async_event, or destroying
//   the affected object blocks) and says what it affects; false when none is
//   pending (or the verbs library lacks the calls).
// * Called with the endpoint pool's mutex held; no state of its own.
#pragma once

#include <cstdint>

#include "core/mlx5/verbs.h"

namespace mlxa2a::mlx5 {

struct AsyncEvent {
  enum class Scope {
    info,    // nothing to contain (LID/GID/SM change, path migrated, ...)
    qp,      // one QP is in error (qpn)
    port,    // the port went down: every QP on it stops
    port_up, // the port is ACTIVE again
    device,  // the CQ or the device failed: nothing here works any more
  };
  Scope scope = Scope::info;
  std::uint32_t qpn = 0;
  const char* name = "";  // e.g. "IBV_EVENT_QP_FATAL", for the log and the trace
};

bool make_nonblocking(ibv_context* ctx) noexcept;
bool next_async_event(const Verbs& v, ibv_context* ctx, AsyncEvent* out) noexcept;
// The event type's name ("IBV_EVENT_PORT_ERR"), static storage.
const char* async_event_name(ibv_event_type t) noexcept;

}  // namespace mlxa2a::mlx5
