// fakeverbs: the C++ objects behind the verbs handles an application holds.
//
// Ownership follows verbs: the application creates and destroys every object
// through ibv_* calls; a parent refuses to be destroyed while children exist
// (EBUSY, as the kernel does).  Each object embeds its public struct in a
// Shell so the handle converts back with owner_of<>().
//
// Thread safety: verbs allows concurrent calls on different objects and on
// one QP/CQ from several threads; each Qp has its own mutex, a Context's
// mutex guards its QP registry.  The process's hca thread (hca.h) executes
// the send queues.  Lock order: hca engine mutex -> Context::mu -> Qp::mu ->
// shared file mutexes (wire.h) -> Cq::arm_mu -> Channel::mu.
#pragma once

#include <infiniband/mlx5dv.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common.h"
#include "config.h"
#include "mr_table.h"
#include "rendezvous.h"
#include "wire.h"

namespace fakeverbs {

struct Qp;
struct Cq;

struct Context {
  Shell<verbs_context, Context> shell{};
  const DeviceSpec* dev = nullptr;
  pid_t owner_pid = 0;    // the process that opened it (another one if imported)
  std::string cmd_file;   // rendezvous name of cmd_fd's file (opened here only)
  std::vector<std::string> gid_links;  // "gid.<key>" links this context published
  std::mutex mu;
  std::map<uint32_t, Qp*> qps;  // by QPN, for progress and SQ retirement
  std::vector<Cq*> channel_cqs;  // CQs with a completion channel (channel.cc)
  std::atomic<int> children{0};
  // Asynchronous events (ibv_get_async_event); async_fd is readable while
  // the queue is non-empty.
  std::mutex ev_mu;
  std::deque<ibv_async_event> events;
  int async_fd = -1;

  ibv_context* ibv() { return &shell.ibv.context; }
  static Context* from(ibv_context* c);
  void push_async(const ibv_async_event& ev);
};

struct Pd {
  Shell<ibv_pd, Pd> shell{};
  Context* ctx = nullptr;
  uint32_t id = 0;  // random, job-wide unique in practice; MRs and QPs must agree on it
  std::atomic<int> children{0};
  // Imported from another process (ibv_import_pd): its MRs live in that
  // process's table and memory.
  bool imported = false;
  // ibv_unimport_pd while MRs/QPs of ours still use it: freed with the last
  // of them (pd_child_gone), since those keep using the owner's table.
  bool unimported = false;
  MappedFile owner_table;
  // The MR table of the PD's memory: the owner's (imported) or ours.
  wire::MrTable* mr_table();
};

struct Mr {
  Shell<ibv_mr, Mr> shell{};
  Pd* pd = nullptr;
  uint32_t slot = 0;           // index in the PD's MR table (the owner's if imported)
  bool imported = false;       // ibv_import_mr: released by ibv_unimport_mr
  unsigned access = 0;         // as registered (fakeverbs_mr_access)
};

// An MR or QP of `pd` is gone: frees an unimported PD with its last child.
void pd_child_gone(Pd* pd);

// A completion channel: events of armed CQs, in order (channel.cc).
struct Channel {
  Shell<ibv_comp_channel, Channel> shell{};
  Context* ctx = nullptr;
  std::mutex mu;
  std::deque<Cq*> events;      // fd (eventfd) counts them
  std::atomic<int> cqs{0};     // CQs attached
};

struct Cq {
  Shell<ibv_cq, Cq> shell{};
  Context* ctx = nullptr;
  Channel* channel = nullptr;
  // Arming (ibv_req_notify_cq), under arm_mu; the hca thread fires it.
  std::mutex arm_mu;
  bool armed = false;
  bool solicited_only = false;
  uint64_t armed_tail = 0;     // ring tail when armed: later entries count
  uint32_t unacked = 0;        // events delivered, not yet acknowledged
  MappedFile file;
  wire::CqRing* ring = nullptr;
  std::atomic<int> users{0};  // QPs using it
  bool overflow_reported = false;
};

// A send work request as queued in the fake send queue: a private copy, so
// the application may reuse its ibv_send_wr (and inline buffers) at once.
struct SendWr {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  unsigned flags = 0;
  uint32_t imm = 0;
  std::vector<ibv_sge> sge;
  std::vector<uint8_t> inline_data;
  bool is_inline = false;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint64_t not_before_ns = 0;   // fault delay
  uint64_t first_try_ns = 0;    // for retry / RNR deadlines
  int forced_status = -1;       // fault-injected completion status
  std::vector<MrRef> pinned;    // local MRs referenced (dereg guard)
  // A DCI's WR: the DCT it goes to (mlx5dv_wr_set_dc_addr).
  bool dc = false;
  std::string dc_dest_key;
  uint32_t dc_dctn = 0;
  uint64_t dc_key = 0;
  bool dc_key_logged = false;  // a mismatched key was said once
  uint64_t total_len() const;
};

struct Outcome;  // post.cc

// The shell of a QP: its ibv_qp is the qp_base of its ibv_qp_ex (as in
// rdma-core's verbs_qp), so ibv_qp_to_qp_ex() and the DC work-request API
// (dc.cc) reach the same object; owner_of<Qp> reads `owner` past both.
struct QpShell {
  union {
    ibv_qp ibv;
    ibv_qp_ex ex;
  };
  mlx5dv_qp_ex dv;
  Qp* owner;
};
template <>
inline Qp* owner_of<Qp, ibv_qp>(ibv_qp* q) {
  return q ? reinterpret_cast<QpShell*>(q)->owner : nullptr;
}

// A shared receive queue (dc.cc): its receives live in a shared file laid
// out as a QP's (wire::QpShared, magic kSrqMagic), so a sender's HCA thread
// consumes them as it consumes an RC QP's.
struct Srq {
  Shell<ibv_srq, Srq> shell{};
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  uint32_t max_sge = 1;
  MappedFile file;
  wire::QpShared* sh = nullptr;
  std::atomic<int> users{0};  // DCTs on it
};

// An address handle (dc.cc): the port a DCI's work request goes to.
struct Ah {
  Shell<ibv_ah, Ah> shell{};
  std::string dest_key;  // as an RC QP's RTR address vector resolves it
};

struct Qp {
  QpShell shell{};
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  MappedFile file;
  wire::QpShared* sh = nullptr;
  std::string link;  // rendezvous link name ("qpn.<key>.<qpn>")

  std::mutex mu;
  std::deque<SendWr> sq;           // posted, not yet executed (by the hca thread)
  // Executed, not yet completed: completions stay in posting order while a
  // READ/atomic response is still "on the wire" (post.cc).
  struct Executed {
    SendWr w;
    std::unique_ptr<Outcome> outcome;
    uint64_t ready_ns;
  };
  std::deque<Executed> executed;
  uint64_t rng = 0;                // jitter and placement order (hca.h)
  uint64_t last_due_ns = 0;        // WRs of one QP execute in posting order
  uint64_t fault_rng = 0;          // fail_prob draws (fault.h), replayable
  uint64_t posted = 0;             // send WRs posted (fail_wr counts them)
  // Send-queue accounting as on hardware: a WR occupies its slot until a
  // completion of it or of a later WR of the QP is polled (selective
  // signalling, man ibv_post_send).  Every CQE-generating WR closes a
  // RetireGroup; polling that CQE frees the group and all earlier ones.
  struct RetireGroup {
    uint32_t seq;
    uint32_t count;
    std::vector<MrRef> pins;
  };
  std::atomic<uint32_t> sq_used{0};  // posted and not yet retired by a poll
  uint32_t open_count = 0;           // executed WRs since the last CQE
  std::vector<MrRef> open_pins;      // their pins
  std::deque<RetireGroup> groups;
  uint32_t next_seq = 1;

  // Attributes kept for ibv_query_qp and for the requester side.
  ibv_qp_attr attr{};
  // Cached mappings of the peer (re-resolved when the peer changes).
  MappedFile peer_qp_file, peer_cq_file, peer_mr_file;
  MappedFile peer_srq_file;  // the DCT's SRQ (dc.cc)

  // DC (dc.cc): MLX5DV_DCTYPE_DCT or _DCI, 0 for RC; a DCT's access key
  // and SRQ; a DCI's work requests being built (ibv_wr_start ... complete).
  int dc_type = 0;
  uint64_t dc_key = 0;
  uint64_t send_ops = 0;  // a DCI's send_ops_flags
  Srq* srq = nullptr;
  bool building = false;
  int build_error = 0;
  std::vector<SendWr> batch;

  uint32_t qpn() const { return shell.ibv.qp_num; }
  bool busy() const { return !sq.empty() || !executed.empty(); }
  Qp();   // out of line (post.cc): Outcome is incomplete here
  ~Qp();
  ibv_qp_state state() const;
  void set_state(ibv_qp_state s);  // takes sh->mu
};

// The QP object of every kind (qp.cc): its shared file and QPN, in RESET.
// nullptr with errno on failure.
Qp* make_qp(Pd* pd, Cq* scq, Cq* rcq, const ibv_qp_cap& cap, bool sig_all, void* qp_context,
            ibv_qp_type type);
// The inline bytes a QP is granted for what `cap` asks (mlx5's rounding);
// written back into cap (qp.cc).
void grant_inline(ibv_qp_cap& cap);
// Queues a validated send WR (copied: its SGEs, inline data) on the QP's
// send queue with its due time (post_api.cc). Caller holds qp.mu.
void enqueue_send(Qp& qp, SendWr&& w, uint64_t delay_ns);
// DC (dc.cc): whether `mask` is allowed for cur -> next on a DCT or DCI.
bool dc_transition_ok(int dc_type, ibv_qp_state cur, ibv_qp_state next, int mask);
// The key of the port an address vector names (qp.cc).
std::string dest_key_of(const DeviceSpec& d, const ibv_ah_attr& ah);

// Process-wide MR table (pd_mr.cc).
wire::MrTable* own_mr_table();

// CQ ring primitive (cq.cc): appends under the ring mutex.  Returns false
// if the ring is full: the CQE is lost and the ring marked overflowed, as a
// CQ overrun on hardware.
bool cq_push(wire::CqRing* ring, const wire::Cqe& e);

// Send-queue engine (post.cc).  progress() executes the due WRs at the head
// of the QP's send queue and returns when to look again: UINT64_MAX (queue
// empty), kBlocked (the head waits for its peer: retry soon) or the head's
// due time.  Caller holds qp.mu.  Called by the hca thread only (and by
// ibv_modify_qp to flush a QP moved to ERR).
constexpr uint64_t kBlocked = 1;
uint64_t progress(Qp& qp);
// Forgets executed, uncompleted WRs (QP reset or destroyed); caller holds qp.mu.
void drop_executed(Qp& qp);
// Fires the events of armed CQs whose arming is satisfied (channel.cc);
// kBlocked while some CQ stays armed.  Caller holds ctx.mu.
uint64_t check_armed(Context& ctx);
// Delivers affiliated events raised by peers (from ibv_poll_cq).
void deliver_events(Context& ctx);
// Moves a QP to the error state and flushes its receive queue (caller may
// hold qp.mu but no shared mutex).
void flush_recv_queue(wire::QpShared* sh, wire::CqRing* cq);

}  // namespace fakeverbs
