#include "core/mpi/hier_engine.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <new>
#include <optional>

#include "core/collective_setup.h"
#include "core/mpi/hier_setup.h"
#include "core/hier/stage_slot.h"
#include "core/log.h"
#include "core/mpi/group_bootstrap.h"
#include "core/mpi/pmpi_transport.h"
#include "core/mpi/pmpi_relay.h"
#include "core/mpi/topology.h"
#if MLXA2A_HAVE_VERBS
#include "core/mlx5/rails.h"
#include "core/mlx5/dc_transport.h"
#include "core/mlx5/qos.h"
#include "core/mlx5/rdma_transport.h"
#include "core/mlx5/zcopy_sender.h"
#include "core/mpi/stacking.h"
#endif

namespace mlxa2a::core::mpi {

namespace {

// The rail this rank would lead (MLXA2A_LEADERS=rails): its process's open
// port's, else its block of the node's rails (core/mlx5/rails.h); -1: none.
int my_rail(const config::NetSwitches& net, int local_rank, int local_size) {
#if MLXA2A_HAVE_VERBS
  const mlx5::RailsHere r = mlx5::rails_here(mlx5::NetOptions(net));
  return r.open >= 0 ? r.open : config::proposed_rail(local_rank, local_size, r.count);
#else
  (void)net, (void)local_rank, (void)local_size;
  return -1;
#endif
}

// This rank's say on leading its node under the policy: 0 it does not, 1 it
// does, 2 + j it leads rail j (hier::NodeMap). numa/socket need every local
// rank's CPU domain, rails every local rank's rail: one PMPI_Allgather on
// the node; the others nothing.
int choose_leadership(const config::LeaderPolicy& policy, const config::NetSwitches& net,
                      MPI_Comm node_comm, int local_rank, int local_size, bool* ok) {
  const bool rails = policy.kind == config::LeaderPolicy::Kind::Rails;
  std::vector<int> said(static_cast<std::size_t>(local_size), -1);
  if (policy.needs_domains() || rails) {
    int mine = rails ? my_rail(net, local_rank, local_size)
                     : cpu_domain(policy.kind == config::LeaderPolicy::Kind::Numa);
    if (PMPI_Allgather(&mine, 1, MPI_INT, said.data(), 1, MPI_INT, node_comm) != MPI_SUCCESS) {
      *ok = false;
    }
  }
  const std::vector<int> leaders =
      rails ? config::choose_rail_leaders(said) : config::choose_leaders(policy, said);
  if (std::find(leaders.begin(), leaders.end(), local_rank) == leaders.end()) return 0;
  const int rail = said[static_cast<std::size_t>(local_rank)];
  return rails && rail >= 0 ? 2 + rail : 1;
}

}  // namespace

// A random engine name, different in every process and every call (so the
// team's maximum names no other engine): splitmix64 over the process id, a
// process-wide counter and the clock.
std::uint64_t pool_proposal() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t z = (static_cast<std::uint64_t>(getpid()) << 32) ^
                    counter.fetch_add(1, std::memory_order_relaxed) ^
                    static_cast<std::uint64_t>(
                        std::chrono::steady_clock::now().time_since_epoch().count());
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

HierEngine::HierEngine(const EngineSettings& s) : settings_(s) { abilities_ = {this, this, this}; }

HierEngine::~HierEngine() = default;

std::unique_ptr<HierEngine> HierEngine::create(const EngineRequest& req,
                                               const EngineSettings& s) noexcept {
  std::unique_ptr<HierEngine> e;
  try {
    e.reset(new HierEngine(s));
  } catch (...) {
    // Allocation only: this rank cannot take part in the set-up's collectives,
    // which an out-of-memory job will not survive anyway.
    return nullptr;
  }
  if (!e->setup(req)) return nullptr;
  try {
    EngineProps& p = e->props_;
    p.kind = EngineProps::Kind::hier;
    p.rdma = e->rdma_;
    p.zcopy = e->zcopy_on_;
    const hier::Plan& plan = e->hier_->plan();
    p.leaders_here = plan.map().leader_count(plan.node());
    for (int k = 1; plan.leader() && k < plan.map().nodes(); ++k) {
      if (plan.handled_by(plan.target(k)) != plan.leader_index()) continue;
      p.targets += (p.targets.empty() ? "" : ",") + std::to_string(plan.target(k));
    }
    p.stage_bytes = e->stage_bytes_;
    p.rdma_why = e->rdma_why_;
    p.zcopy_why = e->zcopy_why_;
    if (e->rdma_ && plan.leader()) p.transport = e->dc_ ? "dc" : "rc";
  } catch (...) {  // a trace's text only
  }
  return e;
}

Status HierEngine::run(const char* send, char* recv, std::size_t bytes) noexcept {
  return run_counted(send, recv, bytes, nullptr);
}

Status HierEngine::run(const char* send, char* recv, std::size_t bytes,
                            Route path) noexcept {
  // hier and rdma: the leaders use the transport agreed at set-up; zcopy the
  // same with the leaders gathering from the ranks' buffers.
  const bool zcopy = path == Route::zcopy && zcopy_ && zcopy_on_;
  return run_counted(send, recv, bytes, zcopy ? zcopy_.get() : nullptr);
}

// Every engine call, staged or zero-copy, is numbered and contained alike:
// the containment agreement names the call by this number on every rank.
Status HierEngine::run_counted(const char* send, char* recv, std::size_t bytes,
                                    hier::SendRegistration* zcopy) noexcept {
  if (bytes != 0) ++engine_calls_;  // run() returns at once on 0, alike on every rank
  return counted(hier_->run(send, recv, bytes, zcopy));
}

// A contained team runs no more rounds: a check is numbered like any engine
// call and ends as contained_call() says - PMPI judges the sizes, or the
// call fails because some rank's failed (the same call on every rank).
Status HierEngine::check_sizes(std::size_t bytes) noexcept {
  if (containment_.engaged()) {
    return contained_call(bytes) ? Status::ok : Status::peer_failed;
  }
  ++engine_calls_;
  return counted(hier_->check(bytes, false, nullptr, nullptr));
}

Status HierEngine::beside_pmpi(std::size_t announced, void (*call)(void*),
                                    void* ctx) noexcept {
  return pmpi_inside(announced, false, call, ctx);
}

Status HierEngine::trial_beside_pmpi(std::size_t announced, void (*call)(void*),
                                     void* ctx) noexcept {
  return pmpi_inside(announced, true, call, ctx);
}

// A contained team's check ends as contained_call() says, alike on every
// rank (a trial there: PMPI judged, nothing learnt of the others: ok, as
// every rank's contained_call() agreed).
Status HierEngine::pmpi_inside(std::size_t announced, bool trial, void (*call)(void*),
                               void* ctx) noexcept {
  if (containment_.engaged()) {
    if (!contained_call(announced)) return Status::peer_failed;
    call(ctx);
    return Status::ok;
  }
  ++engine_calls_;
  return counted(trial ? hier_->trial(announced, call, ctx)
                       : hier_->check(announced, true, call, ctx));
}

Status HierEngine::counted(Status st) noexcept {
  // invalid_argument is refused before anything is shared (a local misuse);
  // size_mismatch and peer_in_pmpi end the call on every rank and leave the
  // engine usable.
  if (st != Status::ok && st != Status::invalid_argument &&
      st != Status::size_mismatch && st != Status::peer_in_pmpi) {
    contain(st);
  }
  return st;
}

Route HierEngine::default_route(std::size_t bytes) const noexcept {
  if (!rdma_) return Route::hier;
  // Zero-copy from MLXA2A_NET_ZCOPY_THRESHOLD up (an all-equal switch).
  const std::uint64_t from = settings_.net.zcopy_threshold;
  return zcopy_on_ && from != 0 && bytes >= from ? Route::zcopy : Route::rdma;
}

void HierEngine::abandon() noexcept {
  // Counted as the engine call it stands for: the peers' one fails.
  ++engine_calls_;
  hier_->abandon();
  contain(Status::broken);
}

void HierEngine::contain(Status st) noexcept {
  // Only RDMA teams: with PMPI leaders the engine stays broken (docs/hier.md).
  if (!rdma_) return;
  // An async event (port down, QP fatal, ...) is usually the cause: its name
  // goes into the containment's log line and trace.
  const char* event = mlx5::EndpointPool::last_event();
  char what[128];
  std::snprintf(what, sizeof what, "%s%s%s", to_string(st),
                *event ? ", last RDMA async event " : "", event);
  containment_.fail(engine_calls_, what);
}

bool HierEngine::contained_call(std::size_t bytes) noexcept {
  if (bytes == 0) return true;  // numbered like run(), which needs no peer for it
  ++engine_calls_;
  return containment_.substitute(engine_calls_) ==
         Containment::Outcome::pmpi;
}


bool HierEngine::setup(const EngineRequest& req) noexcept {
  // Every step runs on every rank whatever happened before, so that no rank
  // skips a collective its peers are in (core/collective_setup.h).
  std::optional<Setup> st;
  try {
    st.emplace(req);
  } catch (...) {
    return false;  // allocation only, as in create()
  }
  Setup& s = *st;
  s.steps.step([&] { return agree_leaders(s); })
      .step([&] { return make_stage(s); })
      .step([&] { return split_leaders(s); })
      .step([&] { try_transports(s); });
  // One Allreduce agrees on {set-up failed, RDMA failed, zero-copy failed}.
  s.steps.agree([&](const SetupOutcome& here) { return agree_transports(s, here); });
  if (!s.steps.failed_here()) s.steps.step([&] { return build(s); });
  // With the outcome, the engine's name for the pool, equal on every rank:
  // the largest of the ranks' random proposals (core/mpi/engine_pool.h).
  s.steps.agree([&](const SetupOutcome& here) -> SetupOutcome {
    std::uint64_t outcome[2] = {here.ok() ? 0u : 1u, pool_proposal()}, agreed[2] = {1, 0};
    if (PMPI_Allreduce(outcome, agreed, 2, MPI_UINT64_T, MPI_MAX, req.comm) != MPI_SUCCESS) {
      agreed[0] = 1;
    }
    pool_id_ = agreed[1] != 0 ? agreed[1] : 1;
    return {agreed[0] != 0 ? Status::create_failed : Status::ok, ""};
  });
  // The containment agreement's communicator (RDMA teams only; every rank
  // knows rdma_ alike); without it the team does not use RDMA.
  if (!s.steps.failed_here() && rdma_) {
    s.steps.agree([&](const SetupOutcome&) -> SetupOutcome {
      int armed = containment_.arm(req.comm, settings_.net.timeout_ms) ? 1 : 0, all_armed = 0;
      if (PMPI_Allreduce(&armed, &all_armed, 1, MPI_INT, MPI_MIN, req.comm) != MPI_SUCCESS ||
          !all_armed) {
        rdma_why_ = "containment set-up failed";
        return {Status::create_failed, ""};
      }
      return {};
    });
  }
  return finish(!s.steps.failed_here());
}

// This rank's place, whether it leads its node (MLXA2A_LEADERS) and one
// Allgather: who leads (the transport addresses every node's leaders), whether
// every leader offers an RDMA port (then RDMA is attempted), and the staging
// sizes for either transport. The staging size sets the rounds, so it must be
// the same on every rank although the switches are node-local (the largest
// wins); it is chosen here, before the stage is made, for the transport the
// team will attempt: RDMA leaders pin their stage (MLXA2A_SHM_SLOT_SIZE),
// PMPI leaders do not (MLXA2A_NET_PMPI_SLOT_SIZE).
bool HierEngine::agree_leaders(Setup& s) {
  bool ok = true;
  PMPI_Comm_rank(s.req.comm, &s.rank);
  if (PMPI_Comm_rank(s.req.node_comm, &s.local_rank) != MPI_SUCCESS ||
      PMPI_Comm_size(s.req.node_comm, &s.local_size) != MPI_SUCCESS) {
    ok = false;
  }
  const int lead = choose_leadership(settings_.leaders, settings_.net, s.req.node_comm,
                                     s.local_rank, s.local_size, &ok);
  s.lead = lead != 0;
  const bool no_rdma_here = s.lead && !rdma_offered();
  constexpr int kSay = 5;
  const std::uint64_t mine[kSay] = {static_cast<std::uint64_t>(lead), no_rdma_here ? 1u : 0u,
                                    settings_.shm.slot_size, settings_.net.pmpi_slot_size,
                                    settings_.net.pmpi_stage_limit};
  std::vector<std::uint64_t> all(kSay * static_cast<std::size_t>(s.req.size));
  const bool gathered = PMPI_Allgather(mine, kSay, MPI_UINT64_T, all.data(), kSay, MPI_UINT64_T,
                                       s.req.comm) == MPI_SUCCESS;
  if (!gathered) {
    ok = false;
    all.assign(all.size(), 0);
  }
  s.leads.resize(static_cast<std::size_t>(s.req.size));
  std::uint64_t any_no_rdma = 0, rdma_slot = 0, pmpi_slot = 0, limit = 0;
  bool unlimited = false;
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.req.size); ++r) {
    const std::uint64_t* say = &all[kSay * r];
    s.leads[r] = static_cast<int>(std::min<std::uint64_t>(say[0], 1u << 20));
    any_no_rdma |= say[1];
    rdma_slot = std::max(rdma_slot, say[2]);
    pmpi_slot = std::max(pmpi_slot, say[3]);
    unlimited |= say[4] == 0;
    limit = std::max(limit, say[4]);
  }
  // Failed here (the set-up fails): a peer that got our say attempts RDMA
  // only if we offer it, so this rank then joins the attempt as before.
  s.attempt_rdma = gathered ? any_no_rdma == 0 : !no_rdma_here;
  pmpi_slot = hier::limited_pmpi_slot(pmpi_slot, rdma_slot, unlimited ? 0 : limit,
                                      hier::largest_node(*s.req.node_ids));
  s.stage_bytes = static_cast<std::size_t>(s.attempt_rdma ? rdma_slot : pmpi_slot);
  if (s.stage_bytes == 0) s.stage_bytes = settings_.shm.slot_size;  // failed allgather only
  s.map.emplace(*s.req.node_ids, s.leads);
  for (int m = 0, at = 0; m < s.map->nodes(); ++m) {
    s.first_rank.push_back(at);
    at += s.map->leader_count(m);
  }
  return ok;
}

// The node's staging segment, collective over the node communicator.
bool HierEngine::make_stage(Setup& s) {
  shm::Options opt = shm_options(settings_.shm, s.req.comm, s.req.oversubscribed);
  opt.hugepages = settings_.net.hugepages;  // the stage is what RDMA leaders register
  const std::size_t area = hier::HierAlltoall::area_bytes(s.req.size, s.local_size, s.stage_bytes);
  MpiBootstrap boot(s.req.node_comm, s.local_rank, s.local_size);
  if (const Status st = shm::NodeStage::create(boot, opt, area, area, s.stage); st != Status::ok) {
    MLXA2A_LOG_LIMITED(Warn, "hierarchical staging set-up failed (%s)", to_string(st));
    return false;
  }
  return true;
}

// The leaders' communicator, ordered by node, then by leader index.
bool HierEngine::split_leaders(Setup& s) {
  const int key = s.map ? s.map->ranks_before(s.map->node_of(s.rank)) + s.local_rank : 0;
  return mpi_own().comm_split(s.req.comm, s.lead && s.map ? 0 : MPI_UNDEFINED, key,
                              s.leaders.out()) == MPI_SUCCESS;
}


// The engine over the agreed transport (PMPI leaders when RDMA is off).
bool HierEngine::build(Setup& s) {
  std::unique_ptr<hier::LeaderTransport> transport;
  if (s.lead && rdma_) {
#if MLXA2A_HAVE_VERBS
    // The leaders' split the RDMA set-up ran on carries what a write could
    // not (docs/hier.md, "Failure transparency"); s.rdma is try_rdma's, RC
    // or DC, and takes it either way.
    std::unique_ptr<hier::Relay> relay = std::make_unique<PmpiRelay>(std::move(s.leaders));
    (void)s.rdma->set_relay(relay);
#endif
    transport = std::move(s.rdma);
  } else if (s.lead) {
    transport = std::make_unique<PmpiLeaderTransport>(std::move(s.leaders), std::move(s.first_rank),
                                                     s.req.oversubscribed, settings_.net.pmpi_piece);
  }
  const Status st = hier::HierAlltoall::create(*s.req.node_ids, s.leads, s.rank, s.stage_bytes,
                                               std::move(s.stage), std::move(transport), hier_);
  if (st != Status::ok) {
    MLXA2A_LOG_LIMITED(Warn, "hierarchical engine set-up failed (%s)", to_string(st));
    return false;
  }
  hier_->set_pipeline(settings_.net.pipeline);  // all-equal: alike on every rank
  stage_bytes_ = s.stage_bytes;
  return true;
}

// After the last agreement: no engine anywhere, or say what is off.
bool HierEngine::finish(bool ok) noexcept {
  if (!ok) {
    hier_.reset();
    zcopy_.reset();
    rdma_ = false;
    zcopy_on_ = false;
    return false;
  }
  if (!rdma_) {
    MLXA2A_LOG(Info, "multi-node team: leaders exchange over PMPI (%s)", rdma_why_.c_str());
  } else if (!zcopy_on_) {
    MLXA2A_LOG(Info, "multi-node team: no zero-copy path, ranks stage their blocks (%s)",
               zcopy_why_.c_str());
  }
  return true;
}
}  // namespace mlxa2a::core::mpi
