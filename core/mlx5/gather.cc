#include "core/mlx5/gather.h"

#include <algorithm>

#include "core/hier/rows.h"

namespace mlxa2a::mlx5 {

namespace {

// Appends one block, merged with the previous SGE when the bytes follow on
// in the same registration; lengths here stay 64-bit-safe because split_wrs
// cuts anything above kMaxSgeBytes, and a merged run never exceeds it.
void add_block(std::uint64_t addr, std::uint32_t lkey, std::size_t chunk,
               std::vector<ibv_sge>* out) {
  if (!out->empty()) {
    ibv_sge& last = out->back();
    if (last.lkey == lkey && last.addr + last.length == addr &&
        last.length + chunk <= kMaxSgeBytes) {
      last.length += static_cast<std::uint32_t>(chunk);
      return;
    }
  }
  // A single chunk may exceed kMaxSgeBytes: cut it here.
  std::uint64_t at = 0;
  while (at < chunk) {
    const std::uint64_t len = std::min<std::uint64_t>(chunk - at, kMaxSgeBytes);
    out->push_back({addr + at, static_cast<std::uint32_t>(len), lkey});
    at += len;
  }
}

}  // namespace

void gather_message(std::span<const SendBuffer> sources, std::span<const int> dest_ranks,
                    std::size_t bytes_per_peer, std::size_t offset, std::size_t chunk,
                    std::vector<ibv_sge>* out, std::size_t first_source) {
  out->clear();
  if (chunk == 0) return;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const SendBuffer& src = sources[i];
    hier::row_runs(first_source + i, dest_ranks.size(), chunk, [&](const hier::BlockRun& run) {
      for (std::size_t b = run.first; b < run.first + run.count; ++b) {
        const auto dest = static_cast<std::uint64_t>(dest_ranks[b]);
        add_block(src.addr + dest * bytes_per_peer + offset, src.lkey, chunk, out);
      }
    });
  }
}

void split_wrs(std::span<const ibv_sge> sges, std::uint32_t max_sge, std::uint64_t max_bytes,
               std::vector<WrSpan>* out) {
  out->clear();
  if (max_sge == 0) max_sge = 1;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < sges.size();) {
    WrSpan wr;
    wr.first_sge = i;
    wr.offset = offset;
    while (i < sges.size() && wr.num_sge < max_sge &&
           (wr.num_sge == 0 || wr.bytes + sges[i].length <= max_bytes)) {
      wr.bytes += sges[i].length;
      ++wr.num_sge;
      ++i;
    }
    offset += wr.bytes;
    out->push_back(wr);
  }
}

}  // namespace mlxa2a::mlx5
