// fakeverbs: the execution of one RC work request against its peer -- the
// fake HCA's requester and responder in one (execute.cc).
//
// Contract: called by the hca thread with the QP's mutex held; moves the data
// with the fake's DMA (placement.h), checks keys, bounds, access and PD where
// an HCA's requester or responder would, and reports the outcome.  A READ or
// atomic leaves its response in the Outcome, to be placed by
// place_response() when it "arrives" (post.cc decides when).
#pragma once

#include <cstdint>
#include <vector>

#include "objects.h"
#include "placement.h"

namespace fakeverbs {

inline bool is_atomic(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

struct Outcome {
  bool wait = false;  // cannot execute now; retry later
  bool rnr = false;   // ... because the receiver had no receive posted
  ibv_wc_status status = IBV_WC_SUCCESS;
  uint32_t byte_len = 0;
  // READ/atomic response: fetched from the responder in order, placed into
  // `local` later (when the response "arrives"), so that a later WR of the
  // QP without IBV_SEND_FENCE may read `local` before it (IB spec 10.8.3.3,
  // the fence indicator).
  std::vector<uint8_t> response;
  Side local;
  // A plain RDMA WRITE into a relaxed-ordering MR (IBV_ACCESS_RELAXED_ORDERING,
  // man ibv_reg_mr: "Allow system to reorder accesses to the MR"): its bytes,
  // read from the source when it executed, are held in `response` and land
  // in `remote` late -- after later WRs' data of the QP -- but before its own
  // completion (place_response) and before the peer can poll any receive
  // completion of the QP (flush_relaxed).
  bool relaxed = false;
  Side remote;
};

// The fake HCA's DMA (dma.cc): moves the bytes of `src` to `dst`, each iovec
// in the memory of the process its PinnedRange names (pid 0: this process),
// so either side may span processes -- a gather list over MRs that several
// registrants put on one shared PD.  Accesses to pages remapped since their
// registration are counted in the MR table of the memory's process and
// logged (`qpn` names the QP); FAKEVERBS_STALE=abort aborts.  Returns the
// side a system call could not reach (its process gone or unmapped memory).
enum class DmaFail { kNone, kSrc, kDst };
DmaFail dma(const Side& src, const Side& dst, uint64_t* rng, uint32_t qpn);

// Executes `w` now.  Outcome::wait: it cannot yet (peer not reachable, or
// RNR); nothing happened, try again later.
Outcome execute(Qp& qp, SendWr& w);

// Places a READ/atomic response into local memory, or a held relaxed-ordering
// write into the peer's (stale pages counted).
void place_response(Qp& qp, Outcome& o);

// Places every held relaxed-ordering write of the QP; caller holds qp.mu.
void flush_relaxed(Qp& qp);

// Completes every posted receive of `sh` with IBV_WC_WR_FLUSH_ERR; caller
// holds sh->mu.
void flush_locked(wire::QpShared* sh, wire::CqRing* cq);

// Moves `peer` to the error state as a responder-class error does (IB spec
// 9.9.3), flushing its receives into peer_cq; its owner gets `ev` as an
// affiliated async event at its next ibv_poll_cq.
void responder_error(wire::QpShared* peer, wire::CqRing* peer_cq, ibv_event_type ev);

}  // namespace fakeverbs
