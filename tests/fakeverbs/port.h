// fakeverbs: what happens to a port while processes run (FAKEVERBS_FAULT
// port_down, port_flap, lid_change, gid_change, fault.h): its state, its
// address, and the unaffiliated async events these raise.
//
// A port is the device's, not a context's: its state is per process and
// device (index), and its events go to every context of that device opened
// by this process (attach/detach). Peers learn of it as a fabric tells them:
// through packets that no longer arrive.
//  * Down: WRs of its QPs find no path and are retried until the port is
//    back (they then complete) or their retry budget runs out
//    (IBV_WC_RETRY_EXC_ERR), as on a link flap; so are the peers' WRs to its
//    QPs (the deadline is in each QP's shared file, wire.h). A flap ends when its time is
//    up; IBV_EVENT_PORT_ACTIVE is raised by whoever looks at the port first
//    (the progress thread retrying a WR, ibv_query_port, ibv_get_async_event).
//  * LID / GID change: ibv_query_port / ibv_query_gid answer the new address,
//    new QPs are reachable at it only, and the port's existing QPs move to it
//    too (their peers, still addressing the old one, are not answered any more
//    and run out of retries, as on a fabric; the peers' packets to us are
//    dropped likewise). IBV_EVENT_LID_CHANGE / _GID_CHANGE is raised.
//
// Thread safety: all functions are thread-safe. Lock order: Context::mu ->
// Qp::mu -> this module's mutex -> Context::ev_mu; relinking takes
// Context::mu and Qp::mu itself, so change_*() must be called with neither.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace fakeverbs {

struct Context;
struct DeviceSpec;

namespace port {

void attach(Context* ctx);
void detach(Context* ctx);

// Whether the port is down now; a flap that has ended raises PORT_ACTIVE here.
bool down(const DeviceSpec& d);
// Down for `ns` nanoseconds (UINT64_MAX: for good); raises PORT_ERR. A port
// already down stays down (for the longer of the two).
void go_down(const DeviceSpec& d, uint64_t ns);
// A new LID (IB) or a new GID index 0 (and its RoCE v1 twin), the port's QPs
// moved to it; raises IBV_EVENT_LID_CHANGE / IBV_EVENT_GID_CHANGE.
void change_lid(const DeviceSpec& d);
void change_gid(const DeviceSpec& d);

// The deadline go_down() set (0: up), for a QP created meanwhile (wire.h).
uint64_t down_until(const DeviceSpec& d);

// The port's address now.
uint16_t lid(const DeviceSpec& d);
ibv_gid gid(const DeviceSpec& d, const ibv_gid& configured);  // a table entry as it is now
std::string address_key(const DeviceSpec& d);                  // how peers name it now

}  // namespace port
}  // namespace fakeverbs
