// The scatter-gather lists of the send-side zero-copy path (issue 15, step
// 3; docs/zerocopy.md): the message a leader writes to a remote node, built
// straight from the node's ranks' send buffers instead of the in-area.
//
// The in-area's section for node m holds block [a][b] (local source a,
// destination b = m's member b) at slot hier::block_slot(a, b, L_m, chunk)
// (core/hier/rows.h: row a, rotated by a from 64-byte chunks).
// gather_message() lists the same bytes in the same order as SGEs: source a's
// published buffer address + dest_rank[b] * bytes_per_peer + offset, chunk
// bytes each, row by row in slot order, merging neighbours that are
// contiguous in one registration (a block layout with one round gives one SGE
// per source, two for a rotated row; round robin one per block). split_wrs() cuts the list into work requests of at most max_sge
// SGEs and max_bytes, and gives each WR its offset in the
// message (the remote address is the section's plus that offset).
//
// Contract: pure computation, no verbs calls, no allocation beyond the output
// vectors (cleared first). Addresses come from Ref::key_for(user pointer) on
// each rank (rcache/regcache.h), never from a registration's start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <infiniband/verbs.h>

#include "core/hier/transport.h"

namespace mlxa2a::mlx5 {

// One rank's send buffer as the rank published it: the NIC address of the
// buffer's first byte and the lkey of the registration covering it.
using SendBuffer = hier::GatherSource;

// A work request's share of an SGE list.
struct WrSpan {
  std::size_t first_sge = 0;
  std::uint32_t num_sge = 0;
  std::uint64_t offset = 0;  // in the message: where its bytes go remotely
  std::uint64_t bytes = 0;
};

// Bound on one SGE's length (ibv_sge.length is 32 bits; the transport keeps
// messages below 1 GiB per write too).
inline constexpr std::uint64_t kMaxSgeBytes = std::uint64_t{1} << 30;

// sources: the node's ranks first_source, first_source + 1, ... in local
// order (a section's rows from row first_source on); dest_ranks: node m's
// members as team ranks, in m's local order. Chunk bytes per block at
// `offset` within each peer's bytes_per_peer. A chunk of 0 gives an empty
// list.
void gather_message(std::span<const SendBuffer> sources, std::span<const int> dest_ranks,
                    std::size_t bytes_per_peer, std::size_t offset, std::size_t chunk,
                    std::vector<ibv_sge>* out, std::size_t first_source = 0);

// Consecutive runs of at most max_sge SGEs (0 counts as 1) and at most
// max_bytes per WR (the port's max_msg_sz; a single SGE larger than it -
// impossible from gather_message when max_bytes >= kMaxSgeBytes - still gets
// a WR of its own). Covers every SGE once, in order.
void split_wrs(std::span<const ibv_sge> sges, std::uint32_t max_sge, std::uint64_t max_bytes,
               std::vector<WrSpan>* out);

}  // namespace mlxa2a::mlx5
