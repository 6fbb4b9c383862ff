// Hierarchical alltoall over several nodes (docs/hier.md): fan-in to the
// node's shared stage, one message per node pair between leaders, fan-out.
//
// Contract
// * create() is local: it checks the stage (built over the node by
//   core/mpi/team.cc) against the plan: local rank and size, area sizes.
// * run() is collective: every rank, same bytes_per_peer; send and recv hold
//   size() blocks in team rank order, not overlapping. Larger calls run in
//   rounds of Plan::max_chunk() bytes per peer, alike on every rank.
// * Errors: as NodeAlltoall; the instance is broken afterwards. A transport
//   failure sets the node's failure flag (its ranks return peer_failed, not
//   wait); other nodes' leaders are left to the transport's error handling.
// * Sizes that differ (bytes_per_peer > 0 everywhere): every rank returns
//   Status::size_mismatch after the same first round, and the instance stays
//   usable: every stage and transport ran exactly that round.
// * run() returns Status::peer_in_pmpi when a peer went to PMPI (check()): call PMPI too.
// * Not thread-safe; destruction is local.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/hier/plan.h"
#include "core/hier/transport.h"
#include "core/hier/zero_copy.h"
#include "core/shm/node_stage.h"

namespace mlxa2a::hier {

class HierAlltoall {
 public:
  // node_ids, leads: as for NodeMap; transport: null on ranks that do not lead.
  [[nodiscard]] static shm::Status create(std::span<const int> node_ids, std::span<const int> leads,
                                          int rank, std::size_t stage_bytes_per_rank,
                                          std::unique_ptr<shm::NodeStage> stage,
                                          std::unique_ptr<LeaderTransport> transport,
                                          std::unique_ptr<HierAlltoall>& out) noexcept;
  // The stage's areas of both parities, for a transport's creation.
  static StageAreas areas_of(const shm::NodeStage& stage) noexcept;
  // A node's area size (in and out alike) incl. the trailer; 0 on overflow.
  static std::size_t area_bytes(int team_size, int local_size,
                                std::size_t stage_bytes_per_rank) noexcept;
  // The in-area's zero-copy trailer: a GatherSource per local rank, 64-byte rounded.
  static std::size_t publish_bytes(int local_size) noexcept;
  HierAlltoall(const HierAlltoall&) = delete;
  HierAlltoall& operator=(const HierAlltoall&) = delete;

  // zero_copy (docs/zerocopy.md): publish the send buffer in the trailer
  // instead of staging remote-bound blocks. Every rank of a node passes one
  // or none alike; only with a transport that gathers(), one leader per node.
  [[nodiscard]] shm::Status run(const void* send, void* recv, std::size_t bytes_per_peer,
                                SendRegistration* zero_copy = nullptr) noexcept;
  // A round without data in place of a run() peers may be in (docs/hier.md
  // "A rank sent to PMPI"), counted as one call like a one-round run().
  // `call(ctx)` (pmpi: this rank's PMPI_Alltoall) runs exactly once whatever
  // happens. Returns, pmpi: ok or a failure (then broken). Else, alike on every
  // rank: ok, peer_in_pmpi (a rank went to PMPI) or size_mismatch.
  [[nodiscard]] shm::Status check(std::size_t announced, bool pmpi, void (*call)(void*),
                                  void* ctx) noexcept {
    return beside(announced, pmpi ? Beside::pmpi : Beside::none, call, ctx);
  }
  // check(pmpi = true) for a pmpi trial (docs/tune.md "What a pmpi trial
  // times"): ok, alike everywhere, iff every rank was in it with `announced`;
  // else size_mismatch or a failure. `call` runs either way.
  [[nodiscard]] shm::Status trial(std::size_t announced, void (*call)(void*), void* ctx) noexcept {
    return beside(announced, Beside::trial, call, ctx);
  }
  // As NodeAlltoall's abandon(), healthy() and rebind() (engine pool).
  void abandon() noexcept;
  bool healthy() const noexcept { return !broken_ && stage_->healthy(); }
  void rebind(const shm::Options& opt) noexcept { stage_->rebind(opt); }
  // MLXA2A_NET_PIPELINE (docs/hier.md "Pipelined rounds"). A protocol choice:
  // the same on every rank of the team, before its first run().
  void set_pipeline(bool on) noexcept { pipeline_ = on; }
  bool pipelined() const noexcept { return pipeline_; }

  const Plan& plan() const noexcept { return plan_; }
  // nullptr on a rank that does not lead.
  const char* transport_name() const noexcept {
    return transport_ ? transport_->name() : nullptr;
  }

 private:
  HierAlltoall(std::span<const int> node_ids, std::span<const int> leads, int rank,
               std::size_t stage_bytes_per_rank);
  // mine: this rank's published send buffer (zero-copy rounds), else null.
  shm::Status round(const char* send, char* recv, std::size_t bytes, std::size_t off,
                    std::size_t chunk, const GatherSource* mine) noexcept;
  shm::Status run_rounds(const char* send, char* recv, std::size_t bytes,
                         const GatherSource* mine) noexcept;
  shm::Status run_pipelined(const char* send, char* recv, std::size_t bytes,
                            const GatherSource* mine) noexcept;
  struct Pipelined;  // run_pipelined()'s state and steps (hier_alltoall.cc)
  // A round's steps on its parity's areas; the copies return bytes copied.
  std::size_t fan_in(char* in, const char* send, std::size_t bytes, std::size_t off,
                     std::size_t chunk, const GatherSource* mine) noexcept;
  // Leader: messages_ (gathers_ if zero_copy and verdict 0) and their Headers.
  void build_messages(char* in, char* out, int parity, std::size_t bytes, std::size_t off,
                      std::size_t chunk, bool zero_copy, std::uint64_t verdict) noexcept;
  // First-round verdicts (Header flags) from the local arrival notes of call k,
  // the partners' Headers (leader) and the leaders' releases (every rank).
  std::uint64_t local_verdict(std::size_t bytes, std::uint64_t k) const noexcept;
  std::uint64_t remote_verdict(std::size_t bytes) const noexcept;
  std::uint64_t released_verdict(std::uint64_t k) const noexcept;
  static shm::Status verdict_status(std::uint64_t verdict) noexcept;
  // none = check(pmpi = false), pmpi = check(pmpi = true), trial = trial().
  enum class Beside : std::uint8_t { none, pmpi, trial };
  shm::Status beside(std::size_t announced, Beside mode, void (*call)(void*), void* ctx) noexcept;
  // Up to the release wait; *posted: exchange to complete; *verdict: released.
  shm::Status check_round(std::uint64_t k, std::size_t announced, Beside mode, bool* posted,
                          std::uint64_t* verdict) noexcept;
  // trial(): kAllTrial only if every partner's Header has it too.
  std::uint64_t trial_verdict(std::uint64_t local, std::size_t announced) const noexcept;
  shm::Status trial_outcome(std::uint64_t k) noexcept;
  shm::Status node_ready(std::uint64_t k, bool at_once) noexcept;
  std::size_t fan_out(const char* in, const char* out, const char* send, char* recv,
                      std::size_t bytes, std::size_t off, std::size_t chunk) noexcept;
  // kOwnDirect: the own block goes send -> recv, not staged (own_block_direct).
  template <bool kOwnDirect>
  std::size_t fan_in_rows(char* in, const char* send, std::size_t bytes, std::size_t off,
                          std::size_t chunk, const GatherSource* mine) noexcept;
  template <bool kOwnDirect>
  std::size_t fan_out_columns(const char* in, const char* out, const char* send, char* recv,
                              std::size_t bytes, std::size_t off, std::size_t chunk) noexcept;
  GatherSource* trailer(char* in) const noexcept {
    return reinterpret_cast<GatherSource*>(in + plan_.area_bytes());
  }
  shm::Status fail(shm::Status st) noexcept;
  // Arrival note marks "went to PMPI" and "in a pmpi trial"; the rest is the
  // size (no call's bytes per peer come near 2^62).
  static constexpr std::uint64_t kNotePmpi = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kNoteTrial = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kNoteMarks = kNotePmpi | kNoteTrial;
  // Sequence d calls before k; near the start 0 (waits for it return at once).
  static std::uint64_t before(std::uint64_t k, std::uint64_t d) noexcept {
    return k > d ? k - d : 0;
  }

  NodeMap map_;
  Plan plan_;
  std::unique_ptr<shm::NodeStage> stage_;
  std::unique_ptr<LeaderTransport> transport_;
  std::vector<int> all_local_;  // 0 .. local_size-1
  std::vector<int> leaders_;    // my node's leaders (local ranks)
  std::vector<Message> messages_;
  std::vector<Gather> gathers_;  // zero-copy rounds: messages_[i].gather = &gathers_[i]
  bool broken_ = false;
  bool pipeline_ = false;
};

}  // namespace mlxa2a::hier
