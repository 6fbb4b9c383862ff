// fakeverbs: the fake devices, read from the environment once per process.
//
// FAKEVERBS_DEVICES=N       number of HCAs mlx5_0..mlx5_{N-1} (default 1, max 8)
// FAKEVERBS_LINK=ib|eth     link layer of every port, or a comma list per device
//                           (ib: LID addressing; eth: RoCE v2, GID addressing)
// FAKEVERBS_PORT_STATE=active|down|init|armed   (default active)
// FAKEVERBS_NODE=K          pretend node number (0..255): changes LIDs, GUIDs
//                           and GIDs so ranks of one host can act as nodes
// FAKEVERBS_PKEYS=k0,k1,... P_Key table of InfiniBand ports, by index (default
//                           0xffff); RoCE ports have the one entry 0xffff
// FAKEVERBS_NUMA=n[,...]    NUMA node of each device (comma list, the last
//                           repeated), answered as sysfs "device/numa_node"
//                           through ibv_read_sysfs_file (default: unknown)
// FAKEVERBS_GIDS=[v1:]ADDR/PREFIX,...  the GID table of RoCE ports, by index
//                           (at most 8): IPv4 addresses as IPv4-mapped GIDs,
//                           IPv6 as they are, RoCE v2 unless "v1:". A packet
//                           is routed only to a GID inside the source GID's
//                           subnet (ADDR/PREFIX), else dropped (retries run
//                           out). Default: the port's IPv4-mapped GID in
//                           10.0.0.0/8 as v2 (index 0) and v1 (index 1)
// FAKEVERBS_SUBNETS=k0,...  subnet number of each device (the last repeated;
//                           default 0): InfiniBand GID prefix fe80:0:0:k (a
//                           LID names a port of its own subnet only: LID
//                           routing never crosses subnets); RoCE (k <= 255,
//                           without FAKEVERBS_GIDS) the GID
//                           ::ffff:172.16.k.<1 + 8 node + dev> in a /24
// FAKEVERBS_DIR=path        rendezvous directory (default: see rendezvous.h)
// FAKEVERBS_FAULT=...       fault injection (see fault.h)
//
// Thread safety: devices() is initialised on first call (thread-safe static)
// and immutable afterwards.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

namespace fakeverbs {

// ConnectX-6-like limits, reported by ibv_query_device and enforced at
// create/post time.  The first five can be lowered (or raised) per process to
// imitate other adapters: FAKEVERBS_MAX_QP_WR, FAKEVERBS_MAX_SGE,
// FAKEVERBS_MAX_CQE, FAKEVERBS_MAX_INLINE, FAKEVERBS_MAX_RD_ATOM.
struct Limits {
  int max_qp_wr = 32768;
  int max_sge = 30;
  int max_cqe = 4194303;
  uint32_t max_inline = 256;
  int max_rd_atom = 16;
  // FAKEVERBS_RELAXED_ORDERING (0/1): whether the device takes
  // IBV_ACCESS_RELAXED_ORDERING at registration (ConnectX-6 does); 0 refuses it.
  bool relaxed_ordering = true;
  static constexpr int kMaxMr = 1 << 16;  // capacity of the fake's MR table
  static constexpr int kPkeyTableLen = 128;
  static constexpr int kGidTableLen = 8;  // index 0 valid (IB); 0..1 (RoCE)
};

struct DeviceSpec {
  ibv_device dev{};    // handed out by ibv_get_device_list; must stay put
  int index = 0;
  bool roce = false;
  ibv_port_state port_state = IBV_PORT_ACTIVE;
  uint16_t lid = 0;    // 0 on RoCE ports
  uint64_t guid = 0;   // host order
  ibv_gid gid{};       // GID index 0
  struct GidEntry {
    ibv_gid gid{};
    ibv_gid_type type = IBV_GID_TYPE_ROCE_V2;
    int prefix = 128;  // bits of the 128-bit GID that name its subnet
  };
  std::vector<GidEntry> gids;  // RoCE: the GID table (index order); gids[0].gid == gid
  std::vector<uint16_t> pkeys;  // P_Key table (host order), pkey_table_len() long
  int numa = -1;                // FAKEVERBS_NUMA; -1: unknown (no answer)
  std::string address_key() const;  // how peers name this port now (rendezvous, port.h)
  int pkey_table_len() const { return roce ? 1 : Limits::kPkeyTableLen; }
  // The entry at `index`, 0 (empty) past the configured ones.
  uint16_t pkey_at(int index) const {
    return index >= 0 && size_t(index) < pkeys.size() ? pkeys[size_t(index)] : 0;
  }
};

const Limits& limits();

// Fixed-address array (pointers into it are handed to the application).
const std::vector<DeviceSpec>& devices();
const DeviceSpec* device_of(const ibv_device* dev);

// Key of a port as named by an address vector: LID and the subnet of `gid`
// (the sender's: LID routing stays in its subnet) on IB, GID on RoCE.
std::string address_key(bool roce, uint16_t lid, const ibv_gid& gid);
// Whether `b` lies in a's subnet (the first `prefix` bits equal).
bool same_subnet(const ibv_gid& a, const ibv_gid& b, int prefix);

}  // namespace fakeverbs
