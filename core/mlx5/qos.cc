#include "core/mlx5/qos.h"

#include <arpa/inet.h>

#include <cstdio>
#include <mutex>
#include <vector>

namespace mlxa2a::mlx5 {

namespace {

constexpr std::uint16_t kFull = 0x8000;
constexpr std::uint16_t kPartition = 0x7fff;
// UCX's RoCE v2 default: DSCP 26 (AF31, the class RoCE fabrics make lossless)
// with ECN-capable transport, 26 << 2 | 2.
constexpr std::uint8_t kRoceTrafficClass = 106;

std::mutex g_summary_mu;
std::string g_summary;
unsigned g_transports = 0;  // bit 0: RC, bit 1: DC (note_transport)

std::string hex16(unsigned v) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%04x", v & 0xffffu);
  return b;
}

}  // namespace

int match_pkey(const std::uint16_t* table, int len, int wanted, bool* limited_only) noexcept {
  *limited_only = false;
  for (int i = 0; i < len; ++i) {
    const std::uint16_t k = table[i];
    if ((k & kPartition) == 0) continue;  // an empty (invalid) entry
    if (wanted >= 0 && (k & kPartition) != (static_cast<unsigned>(wanted) & kPartition)) continue;
    if (k & kFull) return i;
    *limited_only = true;
  }
  return -1;
}

bool resolve_qos(const Verbs& v, ibv_context* ctx, std::uint8_t port, const ibv_port_attr& pa,
                 const NetOptions& opt, Qos* out, std::string* why) {
  const bool roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  Qos q;
  q.traffic_class = static_cast<std::uint8_t>(opt.traffic_class >= 0 ? opt.traffic_class
                                              : roce                 ? kRoceTrafficClass
                                                                     : 0);
  q.service_level = static_cast<std::uint8_t>(opt.service_level);
  const int len = roce ? 1 : static_cast<int>(pa.pkey_tbl_len);
  std::vector<std::uint16_t> table(static_cast<std::size_t>(len > 0 ? len : 0));
  for (int i = 0; i < len; ++i) {
    __be16 k = 0;
    table[static_cast<std::size_t>(i)] = v.query_pkey(ctx, port, i, &k) == 0 ? ntohs(k) : 0;
  }
  bool limited = false;
  const int idx = match_pkey(table.data(), len, roce ? -1 : opt.pkey, &limited);
  if (idx < 0) {
    *why = opt.pkey >= 0 && !roce
               ? "MLXA2A_NET_PKEY=" + hex16(static_cast<unsigned>(opt.pkey)) +
                     (limited ? " has only limited membership" : " is not in the P_Key table") +
                     " of port " + std::to_string(port)
               : "no full-member P_Key in the table of port " + std::to_string(port);
    return false;
  }
  q.pkey = table[static_cast<std::size_t>(idx)];
  q.pkey_index = static_cast<std::uint16_t>(idx);
  *out = q;
  return true;
}

std::string describe(const Qos& q) {
  return "tc=" + std::to_string(q.traffic_class) + " sl=" + std::to_string(q.service_level) +
         " pkey=" + hex16(q.pkey);
}

void set_fabric_summary(std::string s) noexcept {
  std::lock_guard<std::mutex> lock(g_summary_mu);
  g_summary.swap(s);
}

void note_transport(bool dc) noexcept {
  std::lock_guard<std::mutex> lock(g_summary_mu);
  g_transports |= dc ? 2u : 1u;
}

std::string fabric_summary() noexcept try {
  std::lock_guard<std::mutex> lock(g_summary_mu);
  static const char* const kNames[] = {"", " transports=rc", " transports=dc", " transports=rc+dc"};
  return g_summary.empty() ? g_summary : g_summary + kNames[g_transports & 3u];
} catch (...) {  // allocation: the trace goes without it
  return {};
}

}  // namespace mlxa2a::mlx5
