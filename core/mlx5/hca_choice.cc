#include "core/mlx5/hca_choice.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace mlxa2a::mlx5 {

namespace {

int distance(const PortCandidate& c, const std::vector<int>& my_numa) {
  if (c.numa < 0 || my_numa.empty()) return 1;
  return std::find(my_numa.begin(), my_numa.end(), c.numa) != my_numa.end() ? 0 : 2;
}

// The NUMA nodes of a bitmap of them.
std::vector<int> nodes_of(hwloc_const_nodeset_t set) {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

// Borrows the process-wide topology (process_topology()).
class HwlocLocality final : public Locality {
 public:
  explicit HwlocLocality(hwloc_topology_t t) : topo_(t) {}

  int numa_of(const Verbs& v, ibv_device* dev) override {
    const char* name = v.get_device_name(dev);
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo_, nullptr); o;
         o = hwloc_get_next_osdev(topo_, o)) {
      if (!o->name || std::strcmp(o->name, name) != 0) continue;
      hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(topo_, o);
      const std::vector<int> n = a && a->nodeset ? nodes_of(a->nodeset) : std::vector<int>{};
      if (n.size() == 1) return n[0];  // a whole-machine ancestor says nothing
    }
    // Not in hwloc's I/O tree (no PCI support, or a software device): the
    // kernel's own answer, through the verbs library's sysfs reader.
    char buf[16] = {};
    if (v.read_sysfs_file && v.read_sysfs_file(dev->ibdev_path, "device/numa_node", buf,
                                               sizeof buf) > 0) {
      char* end = nullptr;
      const long n = std::strtol(buf, &end, 10);
      if (end != buf && n >= 0 && n < 4096) return static_cast<int>(n);
    }
    return -1;
  }

  std::vector<int> my_numa() override {
    std::vector<int> out;
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
    if (cpus && nodes && hwloc_get_cpubind(topo_, cpus, HWLOC_CPUBIND_PROCESS) == 0) {
      hwloc_cpuset_to_nodeset(topo_, cpus, nodes);
      out = nodes_of(nodes);
    }
    hwloc_bitmap_free(cpus);
    hwloc_bitmap_free(nodes);
    return out;
  }

 private:
  hwloc_topology_t topo_;
};

}  // namespace

HcaChoice choose_hca(const std::vector<PortCandidate>& candidates, const std::vector<int>& my_numa,
                     int leader_slot) {
  HcaChoice out;
  // Only when the subnet decides something: some candidates are on it, some not.
  auto on = [](const PortCandidate& c) { return c.on_subnet; };
  const bool by_subnet = std::any_of(candidates.begin(), candidates.end(), on) &&
                         !std::all_of(candidates.begin(), candidates.end(), on);
  auto eligible = [by_subnet](const PortCandidate& c) { return c.on_subnet || !by_subnet; };
  int best = 3;
  for (const PortCandidate& c : candidates) {
    if (eligible(c)) best = std::min(best, distance(c, my_numa));
  }
  std::vector<int> nearest;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (eligible(candidates[i]) && distance(candidates[i], my_numa) == best) {
      nearest.push_back(static_cast<int>(i));
    }
  }
  if (nearest.empty()) return out;
  const int k = static_cast<int>(nearest.size());
  const int rail = (leader_slot < 0 ? 0 : leader_slot) % k;
  out.index = nearest[static_cast<std::size_t>(rail)];
  const PortCandidate& c = candidates[static_cast<std::size_t>(out.index)];
  static const char* const kind[] = {"-near", "-unknown", "-remote"};
  out.reason = (c.numa < 0 ? std::string("numa?") : "numa" + std::to_string(c.numa)) +
               kind[best] + ",rail" + std::to_string(rail + 1) + "/" + std::to_string(k) +
               (by_subnet ? ",subnet" : "");
  return out;
}

namespace {

// One topology with its I/O tree per process, loaded at the first need and
// never destroyed: the PCI scan is done once, and hwloc's I/O plugins stay
// loaded (destroying the last topology unloads them, and what they keep
// then shows as leaks of an unknown module under LeakSanitizer).
hwloc_topology_t process_topology() {
  static hwloc_topology_t topo = [] {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0) return hwloc_topology_t{nullptr};
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) {
      hwloc_topology_destroy(t);
      return hwloc_topology_t{nullptr};
    }
    return t;
  }();
  return topo;
}

}  // namespace

std::unique_ptr<Locality> hwloc_locality() {
  hwloc_topology_t t = process_topology();
  if (!t) return nullptr;
  try {
    return std::make_unique<HwlocLocality>(t);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace mlxa2a::mlx5
