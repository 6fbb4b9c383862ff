// The one seam to libibverbs: every verbs call of core/mlx5 goes through the
// table below, filled by dlopen("libibverbs.so.1") at first use. Nothing links
// against rdma-core, so the shims load and run where it is absent (RDMA is
// then unavailable, with the reason). fakeverbs is found the same way
// (LD_LIBRARY_PATH, tests/fakeverbs/FIDELITY.md).
//
// Contract
// * load_verbs() is thread-safe and loads once per process; the library is
//   never unloaded (verbs objects may outlive any caller). It returns nullptr
//   when the library or a required symbol is missing; why() says which.
// * The data-path verbs (post_send, post_recv, poll_cq) are not symbols: they
//   dispatch through the context's ops, as verbs.h's inlines do; the wrappers
//   below do the same without referencing a libibverbs symbol.
// * libmlx5.so.1 is opened only if present; no mlx5dv extension is needed by
//   the portable RC path, so its absence changes nothing but the trace. DC
//   (core/mlx5/dc_transport.h) needs its mlx5dv_create_qp and the SRQ, AH and
//   ibv_qp_ex verbs: has_dc() says whether all are there.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

namespace mlxa2a::mlx5 {

struct Verbs {
  decltype(&::ibv_get_device_list) get_device_list;
  decltype(&::ibv_free_device_list) free_device_list;
  decltype(&::ibv_get_device_name) get_device_name;
  decltype(&::ibv_open_device) open_device;
  decltype(&::ibv_close_device) close_device;
  decltype(&::ibv_query_device) query_device;
  int (*query_port_compat)(ibv_context*, uint8_t, _compat_ibv_port_attr*);
  decltype(&::ibv_query_gid) query_gid;
  decltype(&::_ibv_query_gid_ex) query_gid_ex;  // optional (rdma-core >= 31)
  decltype(&::ibv_query_pkey) query_pkey;
  // optional (infiniband/driver.h): device locality, "device/numa_node"
  int (*read_sysfs_file)(const char* dir, const char* file, char* buf, size_t size);
  decltype(&::ibv_alloc_pd) alloc_pd;
  decltype(&::ibv_dealloc_pd) dealloc_pd;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int);
  decltype(&::ibv_dereg_mr) dereg_mr;
  decltype(&::ibv_create_cq) create_cq;
  decltype(&::ibv_destroy_cq) destroy_cq;
  decltype(&::ibv_create_qp) create_qp;
  decltype(&::ibv_modify_qp) modify_qp;
  decltype(&::ibv_destroy_qp) destroy_qp;
  decltype(&::ibv_wc_status_str) wc_status_str;  // optional, for messages
  // Error handling (docs/hier.md, "Errors"): optional, only the checks they
  // serve are skipped without them.
  decltype(&::ibv_query_qp) query_qp;
  decltype(&::ibv_get_async_event) get_async_event;
  decltype(&::ibv_ack_async_event) ack_async_event;
  decltype(&::ibv_event_type_str) event_type_str;
  decltype(&::ibv_resize_cq) resize_cq;
  // Optional (rdma-core >= 32): sharing one PD among the processes of a node
  // (core/mlx5/shared_pd.h). Null when the library predates them.
  decltype(&::ibv_import_device) import_device;
  decltype(&::ibv_import_pd) import_pd;
  decltype(&::ibv_unimport_pd) unimport_pd;
  // Optional (rdma-core >= 35): what fork() does to MRs (core/mlx5/fork_watch.h).
  decltype(&::ibv_is_fork_initialized) is_fork_initialized;
  bool have_mlx5 = false;  // libmlx5.so.1 was found (informational)
  // Optional: DC (core/mlx5/dc_transport.h), the last two from libmlx5.
  decltype(&::ibv_create_srq) create_srq;
  decltype(&::ibv_destroy_srq) destroy_srq;
  decltype(&::ibv_create_ah) create_ah;
  decltype(&::ibv_destroy_ah) destroy_ah;
  decltype(&::ibv_qp_to_qp_ex) qp_to_qp_ex;
  decltype(&::mlx5dv_create_qp) dv_create_qp = nullptr;
  decltype(&::mlx5dv_qp_ex_from_ibv_qp_ex) dv_qp_ex = nullptr;
  bool has_dc() const noexcept {
    return create_srq && destroy_srq && create_ah && destroy_ah && qp_to_qp_ex && dv_create_qp &&
           dv_qp_ex;
  }
  static int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) noexcept {
    return srq->context->ops.post_srq_recv(srq, wr, bad);
  }

  // As verbs.h's ibv_query_port: the extended op when the provider has it.
  int query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const noexcept;
  static int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) noexcept {
    return qp->context->ops.post_send(qp, wr, bad);
  }
  static int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) noexcept {
    return qp->context->ops.post_recv(qp, wr, bad);
  }
  static int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) noexcept {
    return cq->context->ops.poll_cq(cq, n, wc);
  }
};

// nullptr when the library (or a required symbol) is missing. `library` is
// what to dlopen (MLXA2A_NET_VERBS_LIBRARY; "libibverbs.so.1"); the first
// call's name is the one loaded.
const Verbs* load_verbs(const char* library = "libibverbs.so.1") noexcept;
// Why load_verbs() failed, or "" after success (or before the first call).
// Static storage.
const char* verbs_unavailable_reason() noexcept;

}  // namespace mlxa2a::mlx5
