#include "core/route/decide.h"

#include <climits>

namespace mlxa2a::core::route {

namespace {

struct Fixed {
  Route route;  // pmpi, shm or rdma (a family: the engine picks the mode)
  const char* reason;
};

// The fixed rules: MLXA2A_TUNE's rule for this size, else auto by the
// team's capabilities. They decide where nothing is measured and give the
// first candidate where measurement decides.
Fixed fixed_rules(std::uint64_t bytes, Route rule, const Capabilities& caps) {
  switch (rule) {
    case Route::pmpi:
      return {Route::pmpi, "MLXA2A_TUNE selects pmpi for this size"};
    case Route::shm:
      if (caps.shm) return {Route::shm, "MLXA2A_TUNE selects shm"};
      // A multi-node team's leaders use the transport agreed at set-up.
      if (caps.hier && caps.rdma) {
        return {Route::rdma, "MLXA2A_TUNE selects shm: hierarchical, leaders over RDMA"};
      }
      if (caps.hier) return {Route::shm, "MLXA2A_TUNE selects shm: hierarchical, leaders over PMPI"};
      return {Route::pmpi, "MLXA2A_TUNE selects shm but its set-up failed"};
    case Route::rdma:
      if (caps.rdma) return {Route::rdma, "MLXA2A_TUNE selects rdma"};
      return {Route::pmpi, "MLXA2A_TUNE selects rdma but the RDMA engine is not available"};
    default:
      break;
  }
  if (caps.shm && (bytes < caps.shm_auto_from || bytes >= caps.shm_auto_limit)) {
    return {Route::pmpi, "auto: PMPI is faster at this size on an oversubscribed node"};
  }
  if (caps.shm) return {Route::shm, "auto: single-node team"};
  if (caps.rdma) return {Route::rdma, "auto: multi-node team, leaders exchange over RDMA"};
  if (caps.hier && bytes < caps.hier_auto_limit) {
    return {Route::shm, "auto: multi-node team, hierarchical: leaders over PMPI"};
  }
  if (caps.hier && caps.hier_auto_limit == 0) {
    return {Route::pmpi, "auto: multi-node team, about one rank per node: nothing to aggregate"};
  }
  if (caps.hier) return {Route::pmpi, "auto: multi-node team, PMPI is faster at this size"};
  if (caps.nodes > 1) return {Route::pmpi, "auto: multi-node team, hierarchical set-up failed"};
  if (caps.nodes == 1) return {Route::pmpi, "auto: shared-memory set-up failed"};
  return {Route::pmpi, "auto: no engine available for this team"};
}

// A call this rank serves through PMPI by its own size or arguments. In an
// erroneous program a peer of another size may have been routed to the
// engine, where it would wait for this rank forever (docs/shm.md "Mixed
// decisions"). So this rank takes the collective steps such a peer takes at
// a communicator's first call (the state with its team, a derived team's
// set-up) - unless MLXA2A_TUNE sends every size to PMPI (then no rank builds
// anything) - and its PMPI call runs beside the engine's size check.
Answer pmpi_checked(const Query& q, const char* reason) {
  if (pmpi_for_every_size(*q.tune)) return {Next::run, Route::pmpi, reason};
  switch (q.team) {
    case Team::unknown: return {Next::look_up_team, Route::pmpi, nullptr};
    case Team::unavailable: return {Next::run, Route::pmpi, "communicator state unavailable"};
    case Team::pending: return {Next::set_up, Route::pmpi, nullptr};
    case Team::setup_failed: return {Next::run, Route::pmpi, "shared-memory set-up failed"};
    case Team::ready:
      if (q.compares_sizes) return {Next::pmpi_beside, Route::pmpi, reason};
      break;
    default: break;
  }
  return {Next::run, Route::pmpi, reason};
}

}  // namespace

Answer decide(const Query& q) noexcept {
  if (q.sizes_differ) {
    return pmpi_checked(q, "invalid argument (send and receive sizes differ): PMPI judges it");
  }
  const Route rule = q.tune->lookup(q.bytes);
  if (rule == Route::pmpi) return pmpi_checked(q, "MLXA2A_TUNE selects pmpi for this size");
  switch (q.team) {
    case Team::unknown: return {Next::look_up_team, Route::pmpi, nullptr};
    case Team::unavailable: return {Next::run, Route::pmpi, "communicator state unavailable"};
    case Team::inter: return {Next::run, Route::pmpi, "intercommunicator"};
    case Team::setup_failed: return {Next::run, Route::pmpi, "shared-memory set-up failed"};
    default: break;
  }
  const Fixed fixed = fixed_rules(q.bytes, rule, q.caps);
  const bool to_engine = fixed.route != Route::pmpi;
  // Measured selection: sizes MLXA2A_TUNE leaves to auto, on teams with an
  // engine, within the engine's size limit.
  const bool measured = rule == Route::auto_ && q.measure && q.bytes != 0 &&
                        q.bytes <= INT_MAX && q.team != Team::none &&
                        (q.caps.shm || q.caps.hier);
  if ((!to_engine && !measured) || q.team == Team::none) return pmpi_checked(q, fixed.reason);
  // A derived team sets its engine up at the first call that may use it
  // (the same call on every rank); then the agreed caps decide again.
  if (q.team == Team::pending) return {Next::set_up, Route::pmpi, nullptr};
  if (measured && q.tuning == Tuning::unknown) return {Next::start_tuning, Route::pmpi, nullptr};
  const Route engine_route = q.engine ? q.engine_route : Route::pmpi;
  if (measured && q.tuning == Tuning::on) {
    return {Next::tune, to_engine ? engine_route : Route::pmpi, fixed.reason};
  }
  if (!to_engine) return pmpi_checked(q, fixed.reason);
  if (q.bytes > INT_MAX) return pmpi_checked(q, "bytes per peer above 2 GiB: PMPI");
  return {Next::run, engine_route, fixed.reason};
}

}  // namespace mlxa2a::core::route
