// fakeverbs: layouts of the shared files through which processes act on each
// other's queues -- the fake's "wire".  Plain data only; every field that
// another process reads or writes is guarded by the file's robust mutex.
//
// Lock order (deadlock freedom across processes): at most one QP mutex at a
// time; a CQ mutex or MR-table mutex may be taken while holding a QP mutex,
// never the other way round.
#pragma once

#include <infiniband/verbs.h>
#include <pthread.h>
#include <sys/types.h>

#include <cstdint>

namespace fakeverbs::wire {

constexpr uint32_t kCqMagic = 0x46564351;  // "FVCQ"
constexpr uint32_t kQpMagic = 0x46565150;  // "FVQP"
constexpr uint32_t kMrMagic = 0x46564d52;  // "FVMR"
constexpr uint32_t kDeadMagic = 0xdeadbeef;
constexpr uint32_t kDevMagic = 0x46564456;  // "FVDV"
constexpr uint32_t kSrqMagic = 0x46565352;  // "FVSR": a shared receive queue's file

// Contents of a context's command file (its cmd_fd), for ibv_import_device.
struct DeviceRecord {
  uint32_t magic;
  pid_t pid;         // the process that opened the device
  uint32_t device;   // index of the fake device
};

// One completion as stored in a CQ ring.
struct Cqe {
  uint64_t wr_id;
  uint32_t status;      // ibv_wc_status
  uint32_t opcode;      // ibv_wc_opcode
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data;    // network order, as ibv_wc.imm_data
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;
  uint32_t retire;      // send queue slots this completion frees (see qp.h)
  uint32_t solicited;   // a receive of a WR sent with IBV_SEND_SOLICITED
};

struct CqRing {
  uint32_t magic;
  pid_t owner_pid;
  uint32_t capacity;
  uint32_t overflowed;  // sticky: a CQE was lost because the ring was full
  pthread_mutex_t mu;
  uint64_t head;        // next to poll
  uint64_t tail;        // next to fill
  Cqe* entries() { return reinterpret_cast<Cqe*>(this + 1); }
};

// A posted receive.  `sge` has QpShared::rq_sge entries.
struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t pad;
  ibv_sge* sge() { return reinterpret_cast<ibv_sge*>(this + 1); }
};

// The part of a QP its peers act on: state, addressing, receive queue.
struct QpShared {
  uint32_t magic;
  pid_t owner_pid;
  uint32_t qpn;
  uint32_t pd_id;
  uint32_t state;               // ibv_qp_state
  uint32_t access_flags;        // qp_access_flags (responder side)
  uint32_t dest_qpn;            // valid from RTR
  uint32_t max_dest_rd_atomic;  // responder resources, from RTR
  uint32_t min_rnr_timer;       // from RTR
  uint32_t rq_cap;
  uint32_t rq_sge;
  uint32_t pending_event;       // ibv_event_type + 1 raised by a peer; 0 = none
  char local_key[48];           // this QP's port address (rendezvous key)
  // Its port is down until this CLOCK_MONOTONIC time (ns; 0 up, UINT64_MAX
  // for good, port.h): a peer's packets to it are not answered meanwhile.
  uint64_t port_down_until;
  char dest_key[48];            // the peer port address, from RTR
  char recv_cq[64];             // rendezvous name of the receive CQ
  char mr_table[64];            // rendezvous name of the owner's MR table
  // DC (dc.cc): MLX5DV_DCTYPE_DCT or _DCI (0: RC); a DCT's access key, which
  // every incoming work request must carry, and its SRQ's file, whose
  // receives its writes with immediate consume.
  uint32_t dc_type;
  uint64_t dc_key;
  char srq[64];
  pthread_mutex_t mu;
  uint64_t rq_head;             // next receive to consume
  uint64_t rq_tail;             // next slot to post into
  size_t wqe_stride() const { return sizeof(RecvWqe) + rq_sge * sizeof(ibv_sge); }
  RecvWqe* wqe(uint64_t i) {
    return reinterpret_cast<RecvWqe*>(reinterpret_cast<char*>(this + 1) +
                                      (i % rq_cap) * wqe_stride());
  }
};

// Posted, uncompleted WRs of one process that reference an MR (the
// ibv_dereg_mr guard), under the table mutex.  Per process, so that the
// WRs of a process that died stop counting.
struct MrUse {
  pid_t pid;       // 0 = free
  uint32_t wrs;
};

struct MrEntry {
  uint32_t key;     // lkey == rkey; 0 = free slot
  uint32_t pd_id;   // 0 while the slot is reserved by a registration in progress
  uint64_t addr;    // virtual address of the first byte, in mem_pid's memory
  uint64_t iova;    // address work requests use for it (= addr unless ibv_reg_mr_iova)
  uint64_t length;
  uint32_t access;  // ibv_access_flags
  uint32_t last_tag;  // tag of the previous key of this slot (the next one differs)
  // Whose memory: the table's owner, or a process that imported the owner's
  // PD and registered its own memory on it (import.cc).
  pid_t mem_pid;
  uint32_t pad;
  static constexpr int kUsers = 4;
  MrUse users[kUsers];
};

// One per process: all its MRs, for local (lkey) and remote (rkey) checks.
// `atomic_mu` serialises fake HCA atomics targeting this process.
struct MrTable {
  uint32_t magic;
  pid_t owner_pid;
  uint32_t capacity;
  uint32_t pad;
  pthread_mutex_t mu;
  pthread_mutex_t atomic_mu;
  // Accesses through this process's MRs to pages remapped since registration
  // (placement.h), under mu: WRs that wrote into / read from stale pages.
  uint64_t stale_writes;
  uint64_t stale_reads;
  uint64_t stale_bytes;
  // Live protection domains of the owner (ids; 0 = free), for ibv_import_pd.
  static constexpr int kMaxPds = 256;
  uint32_t pd_ids[kMaxPds];
  MrEntry* entries() { return reinterpret_cast<MrEntry*>(this + 1); }
};

}  // namespace fakeverbs::wire
