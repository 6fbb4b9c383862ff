#include "core/plan/plan.h"

#include <climits>

namespace mlxa2a::core::plan {

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

constexpr Plan step(Serve s, Route route = Route::pmpi) { return {s, route}; }
constexpr Plan pmpi(const char* reason) { return {Serve::pmpi, Route::pmpi, reason}; }

// A call this rank serves through PMPI by its own size or arguments. In an
// erroneous program a peer of another size may have been routed to the
// engine, where it would wait for this rank forever (docs/shm.md "Mixed
// decisions"). So this rank takes the collective steps such a peer takes at
// a communicator's first call (the state with its team, a derived team's
// set-up) - unless MLXA2A_TUNE sends every size to PMPI (then no rank builds
// anything) - and its PMPI call runs beside the engine's size check.
Plan pmpi_checked(const Query& q, const char* reason) {
  if (config::rules::pmpi_for_every_size(*q.tune)) return pmpi(reason);
  switch (q.team) {
    case Team::unknown: return step(Serve::look_up_team);
    case Team::unavailable: return pmpi("communicator state unavailable");
    case Team::pending: return step(Serve::set_up);
    case Team::setup_failed: return pmpi("shared-memory set-up failed");
    case Team::ready:
      if (q.compares_sizes) {
        return {form(Route::pmpi, false, true, q.contained, q.bytes), Route::pmpi, reason};
      }
      break;
    default: break;
  }
  return pmpi(reason);
}

// A call of a quiet team (docs/tune.md "Quiet PMPI"): every rank's call of
// any size goes to PMPI_Alltoall, which judges it; no check call. A size
// class not yet decided is held there (not measured) until a boundary
// agreement ends quiet on every rank. A decided pmpi class's alike calls
// repeat up to quiet's next boundary, which every rank's call then meets
// here: if quiet ends, the class's selection (probes) resumes alike on
// every rank instead of a memo that would outlive quiet.
Plan quiet_plan(const Query& q) {
  if (q.sizes_differ) {
    return pmpi("invalid argument (send and receive sizes differ): PMPI judges it");
  }
  if (q.tune->lookup(q.bytes) == Route::pmpi) return pmpi("MLXA2A_TUNE selects pmpi for this size");
  if (q.bytes > INT_MAX) return pmpi("bytes per peer above 2 GiB: PMPI");
  if (!q.quiet_class.asked) return step(Serve::quiet_class);
  Plan p = pmpi(q.quiet_class.reason);
  if (q.quiet_class.decided) p.memo_until = q.quiet_class.until;
  return p;
}

// A class that measured selection decides, once asked (q.measured). A pmpi
// trial on a multi-node team times the form its later calls will take:
// beside the size check where the team cannot become quiet, else (quiet
// calls take no check) the check first and PMPI alone timed (docs/tune.md,
// "What a pmpi trial times").
Plan measured_plan(const Query& q) {
  const Measured& m = q.measured;
  Plan p{form(m.route, q.quiet, q.compares_sizes, q.contained, q.bytes), m.route, m.reason};
  // Measured reasons name the route; the fixed rules' name none, so the
  // trace says zcopy after them.
  if (m.route == Route::zcopy && m.fixed) p.suffix = " zcopy";
  p.timed = m.timed;
  p.trial = m.trial;
  if (!m.timed) {
    p.memo_until = m.memo_until;
  } else if (m.route == Route::pmpi && q.hier && !q.quiet_eligible) {
    p.serve = form(Route::pmpi, false, true, q.contained, q.bytes);
    p.beside_trial = true;
    p.suffix = "; the check beside PMPI timed";
  } else if (m.route == Route::pmpi && q.hier) {
    p.serve = Serve::check_then_pmpi;
  }
  return p;
}

}  // namespace

Plan decide(const Query& q) noexcept {
  if (q.quiet && q.bytes != 0) return quiet_plan(q);
  if (q.sizes_differ) {
    return pmpi_checked(q, "invalid argument (send and receive sizes differ): PMPI judges it");
  }
  const Route rule = q.tune->lookup(q.bytes);
  if (rule == Route::pmpi) return pmpi_checked(q, "MLXA2A_TUNE selects pmpi for this size");
  switch (q.team) {
    case Team::unknown: return step(Serve::look_up_team);
    case Team::unavailable: return pmpi("communicator state unavailable");
    case Team::inter: return pmpi("intercommunicator");
    case Team::setup_failed: return pmpi("shared-memory set-up failed");
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
  if (q.team == Team::pending) return step(Serve::set_up);
  if (measured && q.tuning == Tuning::unknown) return step(Serve::start_tuning);
  const Route engine_route = q.engine ? q.engine_route : Route::pmpi;
  if (measured && q.tuning == Tuning::on) {
    if (q.measured.asked) return measured_plan(q);
    // A peer of another size (an erroneous program) is in another size
    // class, whose tuning state may differ: this call must change no
    // class's state on any rank, so a collective begin() waits for the
    // engine's size check.
    if (q.check_first && q.compares_sizes && !q.sizes_checked) return step(Serve::check_sizes);
    return step(Serve::measure, to_engine ? engine_route : Route::pmpi);
  }
  if (!to_engine) return pmpi_checked(q, fixed.reason);
  if (q.bytes > INT_MAX) return pmpi_checked(q, "bytes per peer above 2 GiB: PMPI");
  if (engine_route == Route::pmpi) return pmpi(fixed.reason);  // the team lost its engine
  Plan p{form(engine_route, false, q.compares_sizes, q.contained, q.bytes), engine_route,
         fixed.reason};
  if (engine_route == Route::zcopy) p.suffix = " zcopy";
  p.memo_until = kMemoForever;
  return p;
}

}  // namespace mlxa2a::core::plan
