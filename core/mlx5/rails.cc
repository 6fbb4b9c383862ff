#include "core/mlx5/rails.h"

#include <memory>
#include <mutex>

#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/link_layer.h"
#include "core/mlx5/resources.h"

namespace mlxa2a::mlx5 {

std::vector<ActivePort> active_ports(const Verbs& v, ibv_device** list, int n) {
  std::vector<ActivePort> out;
  for (int i = 0; list && i < n; ++i) {
    VerbsPtr<ibv_context> ctx(v.open_device(list[i]), {v.close_device, "ibv_close_device"});
    ibv_device_attr attr{};
    if (!ctx || v.query_device(ctx.get(), &attr) != 0) continue;
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      const auto port = static_cast<std::uint8_t>(p);
      if (v.query_port(ctx.get(), port, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
      const bool roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      if (!roce && pa.lid == 0) continue;  // not addressable yet
      ActivePort a{v.get_device_name(list[i]), p, roce, 0, i};
      ibv_gid g{};
      if (!roce && v.query_gid(ctx.get(), port, 0, &g) == 0) a.ib_subnet = ib_subnet_of(g.raw);
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::vector<ActivePort> rails_of(const std::vector<ActivePort>& ports, std::uint32_t layers) {
  std::uint32_t have = 0;
  for (const ActivePort& a : ports) have |= (a.roce ? kLinkEth : kLinkIb) & layers;
  const std::uint32_t layer = have & kLinkIb ? kLinkIb : have;
  std::vector<ActivePort> out;
  for (const ActivePort& a : ports) {
    if (!((a.roce ? kLinkEth : kLinkIb) & layer)) continue;
    // InfiniBand: the first rail's subnet only (see rails.h).
    if (!a.roce && !out.empty() && a.ib_subnet != out.front().ib_subnet) continue;
    out.push_back(a);
  }
  return out;
}

namespace {

// The node's rails, read once per process (a machine's ports; a port that
// goes down later fails its pairs' pings or writes, as any port does).
const std::vector<ActivePort>& process_rails(const NetOptions& opt) {
  static const std::vector<ActivePort> rails = [&] {
    const Verbs* v = load_verbs(opt.verbs_library.c_str());
    if (!v) return std::vector<ActivePort>{};
    int n = 0;
    std::unique_ptr<ibv_device*, decltype(v->free_device_list)> list(v->get_device_list(&n),
                                                                      v->free_device_list);
    return rails_of(active_ports(*v, list.get(), n), kLinkAny);
  }();
  return rails;
}

}  // namespace

RailsHere rails_here(const NetOptions& opt) noexcept try {
  RailsHere out;
  if (!opt.devices.empty()) return out;  // the list names the port
  const std::vector<ActivePort>& rails = process_rails(opt);
  out.count = static_cast<int>(rails.size());
  NetOptions::Port open;
  if (!EndpointPool::open_port(&open)) return out;
  for (std::size_t j = 0; j < rails.size(); ++j) {
    if (rails[j].device == open.device && rails[j].port == open.port) out.open = static_cast<int>(j);
  }
  return out;
} catch (...) {  // allocation only: no rails
  return {};
}

}  // namespace mlxa2a::mlx5
