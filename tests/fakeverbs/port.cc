#include "port.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "common.h"
#include "objects.h"

namespace fakeverbs::port {
namespace {

constexpr int kMaxDevices = 8;  // config.h's FAKEVERBS_DEVICES maximum

// One device's port, as this process sees it. Atomics: the progress thread
// reads them on every retry.
struct State {
  std::atomic<uint64_t> down_until{0};  // now_ns() deadline; 0 up; UINT64_MAX for good
  std::atomic<uint32_t> lid_moves{0};   // lid_change rules fired
  std::atomic<uint32_t> gid_moves{0};   // gid_change rules fired
};

State g_state[kMaxDevices];
std::mutex g_mu;  // guards g_contexts
std::vector<Context*> g_contexts;

State& state_of(const DeviceSpec& d) { return g_state[d.index % kMaxDevices]; }

// An unaffiliated event of port 1 to every context of the device.
void raise(const DeviceSpec& d, ibv_event_type t) {
  ibv_async_event ev{};
  ev.event_type = t;
  ev.element.port_num = 1;
  std::lock_guard<std::mutex> g(g_mu);
  for (Context* c : g_contexts) {
    if (c->dev == &d) c->push_async(ev);
  }
}

// fn(qp) for every QP of the device's contexts, with its mutex and its
// shared file's held. Takes Context::mu and Qp::mu: the caller holds neither.
template <class Fn>
void for_each_qp(const DeviceSpec& d, Fn fn) {
  std::vector<Context*> ctxs;
  {
    std::lock_guard<std::mutex> g(g_mu);
    for (Context* c : g_contexts) {
      if (c->dev == &d) ctxs.push_back(c);
    }
  }
  for (Context* c : ctxs) {
    std::lock_guard<std::mutex> cg(c->mu);
    for (auto& [qpn, qp] : c->qps) {
      std::lock_guard<std::mutex> qg(qp->mu);
      SharedLock lk(&qp->sh->mu);
      fn(*qp);
    }
  }
}

// Every QP of the device answers at the port's address now: its rendezvous
// link and the key peers check (wire.h local_key) follow it.
void move_qps(const DeviceSpec& d) {
  const std::string key = address_key(d);
  for_each_qp(d, [&](Qp& qp) {
    const std::string link = "qpn." + key + "." + std::to_string(qp.qpn());
    if (!publish_link(link, qp.file.name())) {
      log_error("QP 0x%x cannot move to %s (%s): it stays unreachable", qp.qpn(), link.c_str(),
                strerror(errno));
    }
    remove_entry(qp.link);
    qp.link = link;
    snprintf(qp.sh->local_key, sizeof qp.sh->local_key, "%s", key.c_str());
  });
}

}  // namespace

void attach(Context* ctx) {
  std::lock_guard<std::mutex> g(g_mu);
  g_contexts.push_back(ctx);
}

void detach(Context* ctx) {
  std::lock_guard<std::mutex> g(g_mu);
  g_contexts.erase(std::remove(g_contexts.begin(), g_contexts.end(), ctx), g_contexts.end());
}

bool down(const DeviceSpec& d) {
  State& s = state_of(d);
  uint64_t until = s.down_until.load();
  if (until == 0) return false;
  if (until == UINT64_MAX || now_ns() < until) return true;
  // The flap is over: whoever sees it first brings the port up and says so.
  if (s.down_until.compare_exchange_strong(until, 0)) raise(d, IBV_EVENT_PORT_ACTIVE);
  return false;
}

void go_down(const DeviceSpec& d, uint64_t ns) {
  State& s = state_of(d);
  const uint64_t until = ns == UINT64_MAX ? UINT64_MAX : now_ns() + ns;
  uint64_t was = s.down_until.load();
  while (was < until && !s.down_until.compare_exchange_weak(was, until)) {
  }
  // Peers see it in the QPs they send to (wire.h): their packets to us are
  // lost too, until the same time (one monotonic clock on the host).
  for_each_qp(d, [&](Qp& qp) { qp.sh->port_down_until = std::max(until, was); });
  if (was == 0) raise(d, IBV_EVENT_PORT_ERR);
}

uint64_t down_until(const DeviceSpec& d) { return state_of(d).down_until.load(); }

void change_lid(const DeviceSpec& d) {
  if (d.roce) return;  // RoCE ports have no LID
  state_of(d).lid_moves.fetch_add(1);
  move_qps(d);
  raise(d, IBV_EVENT_LID_CHANGE);
}

void change_gid(const DeviceSpec& d) {
  state_of(d).gid_moves.fetch_add(1);
  if (d.roce) move_qps(d);  // RoCE peers address the port by GID
  raise(d, IBV_EVENT_GID_CHANGE);
}

uint16_t lid(const DeviceSpec& d) {
  if (d.roce) return 0;
  // Configured LIDs are below 0x1000 (1 + 16 x node + device): a move adds
  // 0x1000, staying unicast (< 0xc000) for the first ten.
  return uint16_t(d.lid + 0x1000u * state_of(d).lid_moves.load());
}

ibv_gid gid(const DeviceSpec& d, const ibv_gid& configured) {
  ibv_gid g = configured;
  // The port's own address moves to another host of its subnet (+64 on the
  // last byte); other entries of a FAKEVERBS_GIDS table stay.
  if (memcmp(&configured, &d.gid, sizeof d.gid) == 0) {
    g.raw[15] = uint8_t(g.raw[15] + 64 * state_of(d).gid_moves.load());
  }
  return g;
}

std::string address_key(const DeviceSpec& d) {
  return fakeverbs::address_key(d.roce, lid(d), gid(d, d.gid));
}

}  // namespace fakeverbs::port
