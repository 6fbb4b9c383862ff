// Hierarchical alltoall for a team spread over several nodes: every rank
// stages its blocks in its node's shared-memory area (fan-in), the node's
// leader sends one message per remote node and receives one from each
// (LeaderTransport), and every rank picks its blocks up (fan-out). Blocks
// between ranks of one node never leave the node's shared memory.
//
// Contract
// * Creation: the NodeStage (collective over the node) and the transport are
//   built by the caller (core/mpi/team.cc) and handed over; create() itself is
//   local and checks that the stage matches the plan (local rank and size,
//   area sizes).
// * run() is collective over the team: every rank calls it the same number of
//   times with the same bytes_per_peer. send and recv hold size() blocks of
//   bytes_per_peer bytes in team rank order and must not overlap. Calls that
//   exceed one staging round are split into rounds of Plan::max_chunk() bytes
//   per peer; all ranks compute the same rounds. Pipelined (set_pipeline),
//   a rank fills round r+1's staging area while its leaders' round-r
//   exchange is in flight (docs/hier.md "Pipelined rounds").
// * Errors: as NodeAlltoall. A transport failure sets the node's failure flag
//   so the node's other ranks return Status::peer_failed rather than wait;
//   leaders of other nodes are left to the transport's own error handling
//   (with MPI: the user's error handler). The instance is broken afterwards.
// * Sizes that differ across ranks (an erroneous program; bytes_per_peer > 0
//   on every rank): every rank of the team returns Status::size_mismatch
//   from the same call, after its first round, and the instance stays usable
//   (no resync needed: every stage and transport ran that one round).
//   Ranks' sizes travel with their fan-in arrival and in the leaders'
//   Headers (docs/hier.md).
// * Mixed decisions (docs/hier.md "Sizes that differ"): a rank that serves a
//   call through PMPI_Alltoall while a peer may be in run() takes part with
//   check(pmpi = true) instead: one round without data around its PMPI
//   call, whose verdict makes every rank in run() return
//   Status::peer_in_pmpi from that call (the caller then calls
//   PMPI_Alltoall too). check(pmpi = false) is the same round without a
//   PMPI call, for a rank that must know before it goes on.
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
  // rank: this rank in the team; node_ids and leads as for NodeMap. The
  // transport may be null on ranks that do not lead.
  [[nodiscard]] static shm::Status create(std::span<const int> node_ids, std::span<const int> leads,
                                          int rank, std::size_t stage_bytes_per_rank,
                                          std::unique_ptr<shm::NodeStage> stage,
                                          std::unique_ptr<LeaderTransport> transport,
                                          std::unique_ptr<HierAlltoall>& out) noexcept;
  // The stage's areas of both parities, for a transport's creation.
  static StageAreas areas_of(const shm::NodeStage& stage) noexcept;
  // The area size a node's stage needs (in and out alike), before creation:
  // the sections plus the zero-copy trailer (publish_bytes).
  static std::size_t area_bytes(int team_size, int local_size,
                                std::size_t stage_bytes_per_rank) noexcept;
  // The in-area's zero-copy trailer: a GatherSource per local rank, 64-byte rounded.
  static std::size_t publish_bytes(int local_size) noexcept;
  HierAlltoall(const HierAlltoall&) = delete;
  HierAlltoall& operator=(const HierAlltoall&) = delete;

  // zero_copy (docs/zerocopy.md): when given, this rank registers its send
  // buffer through it and publishes it in the in-area's trailer instead of
  // copying its blocks for remote nodes; the leader's transport then gathers
  // them straight from the buffer. Every rank of a node must pass one or
  // none alike (the team decides per call, alike on every rank), only with a
  // transport that gathers() on a node with one leader.
  [[nodiscard]] shm::Status run(const void* send, void* recv, std::size_t bytes_per_peer,
                                SendRegistration* zero_copy = nullptr) noexcept;
  // One round that moves no data, in place of a run() this rank's peers may
  // be in: every local rank arrives with `announced` (and, pmpi, the mark
  // "went to PMPI"); leaders post their exchange with a data message of 0
  // bytes per partner (receives as large as a real round's), release their
  // node with the local verdict at once when pmpi (a rank of the node went
  // to PMPI: nobody here reads data), else after the exchange; then every
  // rank but a pmpi one waits for its leaders' release, `call(ctx)` runs (pmpi: this
  // rank's PMPI_Alltoall, during which the posted messages travel), and the
  // leaders complete the exchange.
  // * call: null, or run exactly once whatever happens (even on a broken
  //   instance), so the rank always serves its call.
  // * Returns (pmpi) ok, or a failure of the stage or transport (the
  //   instance is then broken, as after a failed run()). Without pmpi: ok
  //   when every rank announced `announced` in a real round or a check,
  //   Status::peer_in_pmpi when a rank went to PMPI, Status::size_mismatch
  //   when sizes differ; every rank of the team learns the same.
  // * Counts as one call of the stage and transport, like run() of a size
  //   that fits one round, on every rank (the numbering stays in step).
  [[nodiscard]] shm::Status check(std::size_t announced, bool pmpi, void (*call)(void*),
                                  void* ctx) noexcept {
    return beside(announced, pmpi ? Beside::pmpi : Beside::none, call, ctx);
  }
  // check(pmpi = true) for a pmpi trial of measured selection, which must
  // know afterwards whether the call matched everywhere (docs/tune.md: a
  // mismatched call records no trial anywhere): every rank arrives marked
  // "trial"; leaders wait for their node's arrivals (their headers carry
  // "my whole node is in this trial", Header::kAllTrial), post, release at
  // once, and after `call` and complete() publish what their partners said
  // with their finished signal. Returns ok when every rank of the team was
  // in this trial with `announced` (every rank learns the same), else
  // Status::size_mismatch - after `call` ran either way - or a failure.
  [[nodiscard]] shm::Status trial(std::size_t announced, void (*call)(void*), void* ctx) noexcept {
    return beside(announced, Beside::trial, call, ctx);
  }
  // As NodeAlltoall::abandon(): for a rank that cannot take part in a run()
  // its node's peers have entered.
  void abandon() noexcept;
  // As NodeAlltoall::healthy() and rebind(), for the engine pool: nothing
  // failed here or on this node; later waits take opt's abort callback.
  bool healthy() const noexcept { return !broken_ && stage_->healthy(); }
  void rebind(const shm::Options& opt) noexcept { stage_->rebind(opt); }
  // Pipelined rounds (MLXA2A_NET_PIPELINE) or one round after the other (the
  // default). A protocol choice: every rank of the team must set the same,
  // before its first run().
  void set_pipeline(bool on) noexcept { pipeline_ = on; }
  bool pipelined() const noexcept { return pipeline_; }

  const Plan& plan() const noexcept { return plan_; }
  // The transport's name ("pmpi", "rdma"), or nullptr on a rank that does not lead.
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
  // The steps of a round over the areas `in`/`out` of its parity; the copies
  // return the bytes they copied.
  std::size_t fan_in(char* in, const char* send, std::size_t bytes, std::size_t off,
                     std::size_t chunk, const GatherSource* mine) noexcept;
  // Leader: messages_ (and gathers_ when zero_copy and verdict == 0) for the
  // round, each with its Header {bytes, verdict} written into the in-area.
  void build_messages(char* in, char* out, int parity, std::size_t bytes, std::size_t off,
                      std::size_t chunk, bool zero_copy, std::uint64_t verdict) noexcept;
  // Sizes that differ (first round only): a local rank's arrival note differs
  // from `bytes` (leader, after wait_arrived); a partner's Header differs
  // (leader, after the exchange completed); a leader released a verdict
  // (every rank, after wait_released).
  // The verdicts are Header flags (kOtherSize, kWentPmpi); k: the round's
  // stage sequence (its notes, NodeStage::arrived_note).
  std::uint64_t local_verdict(std::size_t bytes, std::uint64_t k) const noexcept;
  std::uint64_t remote_verdict(std::size_t bytes) const noexcept;
  std::uint64_t released_verdict(std::uint64_t k) const noexcept;
  // The status a first round ends with under a released verdict (ok for 0).
  static shm::Status verdict_status(std::uint64_t verdict) noexcept;
  // check() and trial(): none = check(pmpi = false), pmpi = check(pmpi = true).
  enum class Beside : std::uint8_t { none, pmpi, trial };
  shm::Status beside(std::size_t announced, Beside mode, void (*call)(void*), void* ctx) noexcept;
  // beside()'s steps up to the release wait; *posted: the exchange is to
  // complete; *verdict: a leader's released verdict.
  shm::Status check_round(std::uint64_t k, std::size_t announced, Beside mode, bool* posted,
                          std::uint64_t* verdict) noexcept;
  // trial(): a leader's verdict after complete() (its local one and what its
  // partners' Headers say: kAllTrial only if every one has it), and every
  // trial rank's outcome from its leaders' release and finished notes.
  std::uint64_t trial_verdict(std::uint64_t local, std::size_t announced) const noexcept;
  shm::Status trial_outcome(std::uint64_t k) noexcept;
  // check_round()'s leader: what it waits for before posting call k (at_once:
  // it goes to PMPI itself over a two-sided transport; no node barrier).
  shm::Status node_ready(std::uint64_t k, bool at_once) noexcept;
  std::size_t fan_out(const char* in, const char* out, const char* send, char* recv,
                      std::size_t bytes, std::size_t off, std::size_t chunk) noexcept;
  // fan_in()'s and fan_out()'s loops; kOwnDirect: this rank's own block goes
  // from `send` to `recv` in fan-out, not through the in-area (from 4 KiB
  // blocks, hier_alltoall.cc own_block_direct).
  template <bool kOwnDirect>
  std::size_t fan_in_rows(char* in, const char* send, std::size_t bytes, std::size_t off,
                          std::size_t chunk, const GatherSource* mine) noexcept;
  template <bool kOwnDirect>
  std::size_t fan_out_columns(const char* in, const char* out, const char* send, char* recv,
                              std::size_t bytes, std::size_t off, std::size_t chunk) noexcept;
  // The in-area's trailer: one GatherSource per local rank, after the sections.
  GatherSource* trailer(char* in) const noexcept {
    return reinterpret_cast<GatherSource*>(in + plan_.area_bytes());
  }
  shm::Status fail(shm::Status st) noexcept;
  // An arrival note's marks "this rank went to PMPI" (check(pmpi = true),
  // trial()) and "... for a pmpi trial" (trial()); the rest of the word is
  // the size. No call's bytes per peer come near 2^62.
  static constexpr std::uint64_t kNotePmpi = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kNoteTrial = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kNoteMarks = kNotePmpi | kNoteTrial;
  // The stage sequence d calls before k; 0 (no call: waits for it return
  // at once) near the start.
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
