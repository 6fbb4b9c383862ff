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
    info,     // nothing to contain (path migrated, SRQ limit, ...)
    qp,       // one QP is in error (qpn)
    port,     // the port went down (port): its QPs retry until it returns or
              // their retry budget runs out; new connections wait for it
    port_up,  // the port is ACTIVE again (port)
    address,  // the port's LID, GIDs, P_Keys or SM changed (port): what new
              // set-ups are offered must be read again
    device,   // the CQ or the device failed: nothing here works any more
  };
  Scope scope = Scope::info;
  std::uint32_t qpn = 0;
  std::uint8_t port = 0;  // port scopes: which port of the device
  const char* name = "";  // e.g. "IBV_EVENT_QP_FATAL", for the log and the trace
};

bool make_nonblocking(ibv_context* ctx) noexcept;
bool next_async_event(const Verbs& v, ibv_context* ctx, AsyncEvent* out) noexcept;
// The event type's name ("IBV_EVENT_PORT_ERR"), static storage.
const char* async_event_name(ibv_event_type t) noexcept;

}  // namespace mlxa2a::mlx5
