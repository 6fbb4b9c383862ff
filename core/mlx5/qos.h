// The fabric's quality of service and partition for this process's queue
// pairs: traffic class (RoCE: the GRH's DSCP + ECN byte), service level and
// P_Key, resolved once per opened port from NetOptions (the MLXA2A_NET_*
// switches) and the port's P_Key table.
//
// Why: a RoCE fabric configured for PFC/ECN puts only marked traffic in its
// lossless class; unmarked alltoall incast lands in the lossy one and drops
// turn into go-back-N retransmits. A partitioned InfiniBand subnet accepts a
// packet only when both QPs use the same P_Key (IB spec 10.9), so the pkey is
// chosen by value and looked up, never taken as index 0. Defaults are UCX's
// (UCX_IB_TRAFFIC_CLASS=auto: 106 on RoCE v2, else 0; UCX_IB_SL=0;
// UCX_IB_PKEY=auto: the first entry with full membership), so mlxa2a's
// traffic lands where the site's UCX traffic does.
//
// Contract: resolve_qos() queries the port's P_Key table only (blocking verbs
// calls, no state); MPI-free; the result is plain data the caller keeps.
#pragma once

#include <cstdint>
#include <string>

#include "core/mlx5/options.h"
#include "core/mlx5/verbs.h"

namespace mlxa2a::mlx5 {

struct Qos {
  std::uint8_t traffic_class = 0;  // RoCE only (the GRH); InfiniBand: 0, no GRH sent
  std::uint8_t service_level = 0;  // address vector's sl (IB: SL->VL; RoCE: priority)
  std::uint16_t pkey = 0xffff;     // the table entry, membership bit included
  std::uint16_t pkey_index = 0;    // its index, for ibv_modify_qp(INIT)
};

// A P_Key table entry matching `wanted` (-1: any valid one): the low 15 bits
// name the partition, bit 15 is full membership. Two limited members cannot
// talk to each other, so only a full-member entry is taken. Pure, for tests:
// -1 if none, and *limited_only set when the partition is there but limited.
int match_pkey(const std::uint16_t* table, int len, int wanted, bool* limited_only) noexcept;

// The QoS of `port`: false with *why naming the switch when the wanted P_Key
// is not in the port's table (the port is then not used). RoCE ports use
// P_Key index 0 (the one default entry) whatever MLXA2A_NET_PKEY says.
bool resolve_qos(const Verbs& v, ibv_context* ctx, std::uint8_t port, const ibv_port_attr& pa,
                 const NetOptions& opt, Qos* out, std::string* why);

// RoCE v2: the IPv6 flow label of the RC pair between QP numbers a and b
// (the same at both ends), which the HCA hashes into the UDP source port:
// distinct pairs, and so a node pair's several QPs (stripe s of the pair,
// docs/hier-transports.md "Stripes", mixed in above the 48 bits of QP
// numbers; stripe 0 is the unstriped pair's label), take distinct ECMP
// paths whatever the kernel does with a zero label. 20 bits, never 0 (0: no label).
constexpr std::uint32_t pair_flow_label(std::uint32_t a, std::uint32_t b,
                                        std::uint32_t stripe = 0) noexcept {
  const std::uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
  std::uint64_t z = (std::uint64_t{stripe} << 48 | hi << 24 | lo) * 0x9e3779b97f4a7c15ull;
  z ^= z >> 29;
  const std::uint32_t label = static_cast<std::uint32_t>(z >> 40) & 0xfffffu;
  return label != 0 ? label : 1;
}

// "tc=106 sl=0 pkey=0xffff" for the trace.
std::string describe(const Qos& q);

// What this process's endpoint pool opened, for the team trace line
// ("hca=mlx5_0:1 link=ib tc=0 sl=0 pkey=0xffff"); "" before that. Thread-safe.
void set_fabric_summary(std::string s) noexcept;
// The summary, with " transports=rc", "dc" or "rc+dc" once a team of this
// process set up a leader transport (note_transport: "rc" or "dc"), for the
// stats' fabric entry and so hwcheck's leaders table.
std::string fabric_summary() noexcept;
void note_transport(bool dc) noexcept;

}  // namespace mlxa2a::mlx5
