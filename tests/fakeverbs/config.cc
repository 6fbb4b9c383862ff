#include "config.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "common.h"
#include "hca.h"
#include "port.h"

namespace fakeverbs {

void log_error(const char* fmt, ...) {
  const char* quiet = getenv("FAKEVERBS_QUIET");
  if (quiet && *quiet == '1') return;
  // The first diagnostic of a process names its seed: a failure seen with
  // jitter and shuffled placement replays with FAKEVERBS_SEED=<it>.
  static std::once_flag seed_once;
  std::call_once(seed_once, [] {
    fprintf(stderr, "fakeverbs: pid %d runs with FAKEVERBS_SEED=%llu FAKEVERBS_JITTER_US=%llu\n",
            int(getpid()), (unsigned long long)hca::seed(),
            (unsigned long long)(hca::jitter_ns() / 1000));
  });
  va_list ap;
  va_start(ap, fmt);
  fputs("fakeverbs: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

namespace {

int env_int(const char* name, int def, int lo, int hi) {
  const char* v = getenv(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  long x = strtol(v, &end, 0);
  if (*end || x < lo || x > hi) {
    log_error("%s=%s out of range [%d,%d], using %d", name, v, lo, hi, def);
    return def;
  }
  return int(x);
}

// Item i of a comma list (the last one repeated past its end).
std::string list_item(const char* v, int i) {
  std::string s(v);
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    size_t c = s.find(',', pos);
    parts.push_back(s.substr(pos, c == std::string::npos ? c : c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return parts[size_t(i) < parts.size() ? size_t(i) : parts.size() - 1];
}

// Link layer for device i from "ib", "eth" or "ib,eth,...".
bool link_is_roce(int i) {
  const char* v = getenv("FAKEVERBS_LINK");
  if (!v) return false;
  const std::string p = list_item(v, i);
  return p == "eth" || p == "roce" || p == "ethernet";
}

// NUMA node of device i from FAKEVERBS_NUMA ("0,1,..."), -1 if unset or bad.
int numa_of(int i) {
  const char* v = getenv("FAKEVERBS_NUMA");
  if (!v || !*v) return -1;
  const std::string p = list_item(v, i);
  char* end = nullptr;
  const long n = strtol(p.c_str(), &end, 10);
  if (p.empty() || *end || n < 0 || n > 1023) {
    log_error("FAKEVERBS_NUMA=%s: item %d is not a NUMA node number, left unknown", v, i);
    return -1;
  }
  return int(n);
}

// FAKEVERBS_PKEYS for an InfiniBand port: a comma list of values (0x... or
// decimal), index order; a bad item or more than the table holds is
// reported and the default (0xffff alone) used.
std::vector<uint16_t> pkey_table(bool roce) {
  const char* v = getenv("FAKEVERBS_PKEYS");
  if (roce || !v || !*v) return {0xffff};
  std::vector<uint16_t> out;
  const char* p = v;
  while (*p) {
    char* end = nullptr;
    const unsigned long k = strtoul(p, &end, 0);
    if (end == p || k > 0xffff || (*end && *end != ',') ||
        out.size() == size_t(Limits::kPkeyTableLen)) {
      log_error("FAKEVERBS_PKEYS=%s: not a list of at most %d 16-bit values, using 0xffff", v,
                Limits::kPkeyTableLen);
      return {0xffff};
    }
    out.push_back(uint16_t(k));
    p = *end ? end + 1 : end;
  }
  return out;
}

// One FAKEVERBS_GIDS entry: "[v1:]ADDR/PREFIX"; false if malformed.
bool parse_gid(std::string item, DeviceSpec::GidEntry* e) {
  if (item.rfind("v1:", 0) == 0) {
    e->type = IBV_GID_TYPE_ROCE_V1;
    item = item.substr(3);
  }
  const size_t slash = item.find('/');
  if (slash == std::string::npos) return false;
  const std::string addr = item.substr(0, slash);
  char* end = nullptr;
  const long prefix = strtol(item.c_str() + slash + 1, &end, 10);
  if (*end) return false;
  if (addr.find(':') == std::string::npos) {
    e->gid.raw[10] = e->gid.raw[11] = 0xff;
    e->prefix = int(96 + prefix);
    return prefix >= 0 && prefix <= 32 && inet_pton(AF_INET, addr.c_str(), &e->gid.raw[12]) == 1;
  }
  e->prefix = int(prefix);
  return prefix >= 0 && prefix <= 128 && inet_pton(AF_INET6, addr.c_str(), e->gid.raw) == 1;
}

// The GID table of a RoCE port whose own address is `gid` in a subnet of
// `prefix` bits.
std::vector<DeviceSpec::GidEntry> gid_table(const ibv_gid& gid, int prefix) {
  std::vector<DeviceSpec::GidEntry> def(2);
  def[0] = {gid, IBV_GID_TYPE_ROCE_V2, prefix};
  def[1] = {gid, IBV_GID_TYPE_ROCE_V1, prefix};
  const char* v = getenv("FAKEVERBS_GIDS");
  if (!v || !*v) return def;
  std::vector<DeviceSpec::GidEntry> out;
  const int n = int(std::count(v, v + strlen(v), ',')) + 1;
  for (int i = 0; i < n; ++i) {
    const std::string item = list_item(v, i);
    DeviceSpec::GidEntry e;
    if (!parse_gid(item, &e) || out.size() == size_t(Limits::kGidTableLen)) {
      log_error("FAKEVERBS_GIDS=%s: item '%s' is not [v1:]ADDR/PREFIX (or more than %d), "
                "using the default table", v, item.c_str(), Limits::kGidTableLen);
      return def;
    }
    out.push_back(e);
  }
  return out;
}

// FAKEVERBS_SUBNETS item of device i: its subnet number (0 default), -1 bad.
int subnet_of(int i, bool roce) {
  const char* v = getenv("FAKEVERBS_SUBNETS");
  if (!v || !*v) return 0;
  const std::string p = list_item(v, i);
  char* end = nullptr;
  const long k = strtol(p.c_str(), &end, 0);
  if (p.empty() || *end || k < 0 || k > (roce ? 255 : 0xffff)) {
    log_error("FAKEVERBS_SUBNETS=%s: item %d is not a subnet number (0..%d), using 0", v, i,
              roce ? 255 : 0xffff);
    return 0;
  }
  return int(k);
}

ibv_port_state port_state() {
  const char* v = getenv("FAKEVERBS_PORT_STATE");
  if (!v || !strcmp(v, "active")) return IBV_PORT_ACTIVE;
  if (!strcmp(v, "down")) return IBV_PORT_DOWN;
  if (!strcmp(v, "init")) return IBV_PORT_INIT;
  if (!strcmp(v, "armed")) return IBV_PORT_ARMED;
  log_error("FAKEVERBS_PORT_STATE=%s unknown, using active", v);
  return IBV_PORT_ACTIVE;
}

std::vector<DeviceSpec> make_devices() {
  const int n = env_int("FAKEVERBS_DEVICES", 1, 0, 8);
  const int node = env_int("FAKEVERBS_NODE", 0, 0, 255);
  std::vector<DeviceSpec> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    DeviceSpec& d = v[size_t(i)];
    d.index = i;
    d.roce = link_is_roce(i);
    d.port_state = port_state();
    d.pkeys = pkey_table(d.roce);
    d.numa = numa_of(i);
    // Mellanox OUI 00:02:c9 in the GUID, node and device in the low bytes.
    d.guid = 0x0002c90300000000ull | (uint64_t(node) << 8) | uint64_t(i);
    const int subnet = subnet_of(i, d.roce);
    if (d.roce) {
      // RoCE v2 GID of an IPv4 address: ::ffff:10.<node>.<dev>.1 (10/8), or
      // with FAKEVERBS_SUBNETS ::ffff:172.16.<subnet>.<host> in a /24, host
      // 1 + (8 node + dev) mod 254 (unique up to node 31).
      uint8_t* r = d.gid.raw;
      r[10] = r[11] = 0xff;
      const uint8_t own[4] = {10, uint8_t(node), uint8_t(i), 1};
      const uint8_t sub[4] = {172, 16, uint8_t(subnet), uint8_t(1 + (8 * node + i) % 254)};
      memcpy(r + 12, subnet ? sub : own, 4);
      d.gids = gid_table(d.gid, subnet ? 96 + 24 : 96 + 8);
      d.gid = d.gids[0].gid;
    } else {
      d.lid = uint16_t(1 + node * 16 + i);
      // IB GID: subnet prefix fe80:0:0:<subnet> + port GUID (big endian).
      d.gid.raw[0] = 0xfe;
      d.gid.raw[1] = 0x80;
      d.gid.raw[6] = uint8_t(subnet >> 8);
      d.gid.raw[7] = uint8_t(subnet);
      for (int b = 0; b < 8; ++b) d.gid.raw[8 + b] = uint8_t(d.guid >> (56 - 8 * b));
    }
    d.dev.node_type = IBV_NODE_CA;
    d.dev.transport_type = IBV_TRANSPORT_IB;
    snprintf(d.dev.name, sizeof d.dev.name, "mlx5_%d", i);
    snprintf(d.dev.dev_name, sizeof d.dev.dev_name, "uverbs%d", i);
    snprintf(d.dev.dev_path, sizeof d.dev.dev_path,
             "/sys/class/infiniband_verbs/uverbs%d", i);
    snprintf(d.dev.ibdev_path, sizeof d.dev.ibdev_path,
             "/sys/class/infiniband/mlx5_%d", i);
  }
  return v;
}

}  // namespace

std::string address_key(bool roce, uint16_t lid, const ibv_gid& gid) {
  char buf[64];
  if (!roce) {
    // LIDs are unique within a subnet only: another subnet's LID x is
    // another port (FAKEVERBS_SUBNETS). The default subnet keeps "L<lid>".
    const unsigned subnet = unsigned(gid.raw[6]) << 8 | gid.raw[7];
    if (subnet) snprintf(buf, sizeof buf, "L%u.s%x", unsigned(lid), subnet);
    else snprintf(buf, sizeof buf, "L%u", unsigned(lid));
  } else {
    char* p = buf;
    *p++ = 'G';
    for (int i = 0; i < 16; ++i) p += snprintf(p, 3, "%02x", gid.raw[i]);
  }
  return buf;
}

bool same_subnet(const ibv_gid& a, const ibv_gid& b, int prefix) {
  for (int bit = 0; bit < prefix && bit < 128; ++bit) {
    const int mask = 0x80 >> (bit % 8);
    if ((a.raw[bit / 8] & mask) != (b.raw[bit / 8] & mask)) return false;
  }
  return true;
}

std::string DeviceSpec::address_key() const { return port::address_key(*this); }

const Limits& limits() {
  static const Limits l = [] {
    Limits x;
    x.max_qp_wr = env_int("FAKEVERBS_MAX_QP_WR", x.max_qp_wr, 1, 1 << 22);
    x.max_sge = env_int("FAKEVERBS_MAX_SGE", x.max_sge, 1, 64);
    x.max_cqe = env_int("FAKEVERBS_MAX_CQE", x.max_cqe, 1, 1 << 24);
    x.max_inline = uint32_t(env_int("FAKEVERBS_MAX_INLINE", int(x.max_inline), 0, 4096));
    x.max_rd_atom = env_int("FAKEVERBS_MAX_RD_ATOM", x.max_rd_atom, 0, 255);
    x.relaxed_ordering = env_int("FAKEVERBS_RELAXED_ORDERING", 1, 0, 1) != 0;
    return x;
  }();
  return l;
}

const std::vector<DeviceSpec>& devices() {
  static const std::vector<DeviceSpec> devs = make_devices();
  return devs;
}

const DeviceSpec* device_of(const ibv_device* dev) {
  for (const DeviceSpec& d : devices())
    if (&d.dev == dev) return &d;
  return nullptr;
}

}  // namespace fakeverbs
