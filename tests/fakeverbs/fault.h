// fakeverbs: fault injection for reliability tests of the engine.
//
// FAKEVERBS_FAULT is a comma list of rules; counters are per process
// (re-read after fork, so a test may set the variable in one child only):
//   fail_post=N    the Nth ibv_post_send call (or ibv_wr_complete on a DCI,
//                  counted with them) fails with ENOMEM (nothing posted)
//   fail_recv=N    the Nth ibv_post_recv call fails with ENOMEM
//   retry_exc=N    the Nth send WR executed completes with IBV_WC_RETRY_EXC_ERR
//   rem_access=N   the Nth send WR executed completes with IBV_WC_REM_ACCESS_ERR
//   drop_cqe=N     the Nth completion this process generates is lost
//   delay_us=D     every send WR executes D microseconds after it was posted
//                  (its data lands and it completes only then, via poll_cq)
//   fail_reg=N     the Nth ibv_reg_mr call fails with ENOMEM
//   fail_wr=K@Q[:st]  the Kth send WR posted on a QP connected to remote QPN Q
//                  completes with st (retry_exc, the default, or rem_access);
//                  without @Q: on every QP
//   fail_prob=P[@Q][:st]  each send WR (of QPs connected to Q) fails with
//                  probability P, drawn from the QP's seeded stream (hca.h)
//   qp_error=N     at the Nth ibv_post_send call the QP moves to the error
//                  state (IBV_EVENT_QP_FATAL); the WRs are flushed
//   resp_error=N   at the Nth ibv_query_qp call every QP of this process in
//                  RTS moves to the error state as a responder error does
//                  (a late write hitting a deregistered rkey): its receives
//                  are flushed and IBV_EVENT_QP_ACCESS_ERR is raised, but no
//                  send of ours fails and the partner's end stays in RTS
//   cq_overrun=N   once the process's ibv_poll_cq calls have delivered N
//                  completions the CQ overruns: completions written later
//                  are lost and IBV_EVENT_CQ_ERR is raised (what a CQ too
//                  small for its QPs does)
//   port_down=N    at the Nth ibv_post_send call the port goes down for good
//                  (IBV_EVENT_PORT_ERR; ibv_query_port says DOWN): WRs are
//                  retried until the QP's retry budget runs out, as on a
//                  dead link
//   port_flap=N:MS at the Nth ibv_post_send call the port goes down for MS
//                  milliseconds (IBV_EVENT_PORT_ERR, then
//                  IBV_EVENT_PORT_ACTIVE): WRs queued meanwhile complete if
//                  it is back within their QP's retry budget, else fail
//                  with IBV_WC_RETRY_EXC_ERR (port.h)
//   lid_change=N   at the Nth ibv_post_send call the port gets a new LID
//                  (IBV_EVENT_LID_CHANGE; InfiniBand ports only)
//   dc_bad_key=N   the Nth DC work request this process posts (ibv_wr_complete
//                  on a DCI) carries a DC access key other than the one its
//                  poster gave: the DCT drops it, the DCI retries out (dc.cc)
//   gid_change=N   at the Nth ibv_post_send call GID index 0 (and its RoCE
//                  v1 twin) changes (IBV_EVENT_GID_CHANGE); on RoCE, the
//                  port's address
// The variable is re-read when it changes (counters restart), so a test may
// aim a rule at a QPN it learns at run time.
// An erroring WR moves its QP to the error state exactly as a real error does.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <cstdint>

namespace fakeverbs::fault {

bool fail_post_send();
bool fail_post_recv();
bool fail_reg_mr();
bool qp_error_now();
bool resp_error_now();
// Whether the CQ overruns now: the process has delivered `delivered`
// completions so far (counted by completions, not calls: polls spin).
bool cq_overrun_now(uint64_t delivered);
bool port_down_now();
// At this ibv_post_send call: how long the port goes down (port_flap, ns;
// 0 not now), and whether its LID / GID change.
uint64_t port_flap_now();
bool lid_change_now();
bool gid_change_now();
bool dc_bad_key_now();
// -1, or the ibv_wc_status to force on a WR: the qp_index-th (from 1) posted
// on a QP connected to dest_qpn; `rng` is that QP's fault stream.
int wr_status(uint32_t dest_qpn, uint64_t qp_index, uint64_t* rng);
bool drop_cqe();
uint64_t delay_ns();

}  // namespace fakeverbs::fault
