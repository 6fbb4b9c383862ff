#include "core/selection.h"

namespace mlxa2a::core {

namespace {

// Where PMPI beats our engines, by layout (bench/results/single-node.md, 2 cores).
// With more ranks than cores, Open MPI's own alltoall catches up once each
// rank moves about 2 MiB (bytes per peer * ranks): np=8 at 256 KiB per peer
// measured 0.93-1.12x, np=4 at 1 MiB 1.07-1.30x, while np=4 at 512 KiB kept
// a small win (0.85-0.94x) that is given up for safety. Every round of our
// copy path costs context switches there.
constexpr std::uint64_t kOversubscribedAutoTotal = std::uint64_t{2} << 20;
// The hierarchical engine aggregates small blocks into one message per pair
// of nodes; for large blocks its extra copies and single sender per node lose
// to the MPI's own pairwise exchange (docs/hier.md).
constexpr std::uint64_t kHierAutoLimit = 2048;

}  // namespace

void set_auto_ranges(Capabilities& caps, int size, bool oversubscribed,
                     bool pmpi_wins_oversubscribed) {
  // Unless aggregation at least halves the number of messages (nodes *
  // (nodes - 1) vs size * (size - 1)), as with about one rank per node, the
  // staging is mostly overhead: auto leaves such teams to PMPI.
  const double n = size, nodes = caps.nodes;
  caps.hier_auto_limit = 2 * nodes * (nodes - 1) <= n * (n - 1) ? kHierAutoLimit : 0;
  if (oversubscribed && pmpi_wins_oversubscribed && size > 0) {
    caps.shm_auto_limit = kOversubscribedAutoTotal / static_cast<std::uint64_t>(size);
  }
}

}  // namespace mlxa2a::core
