#!/usr/bin/env python3
"""Schedule simulation of node-aggregated alltoall (issue 39 item 7).

Where bench/model_bench adds four terms, this plays each call out on
per-resource timelines: every rank's copies, the node's synchronisations, the
leader's CPU posting work requests one by one, and per node one NIC with a
work-request engine (message rate), a PCIe read and a PCIe write channel and a
transmit and a receive link. A resource does one thing at a time, first come
first served; a message passes send engine -> PCIe read -> transmit link ->
(latency) -> receive link -> PCIe write, so several senders arriving at one
receive link queue behind each other (incast). Every parameter is either
cited (a public figure) or derived (arithmetic on cited ones, or measured on
this host and said so): PARAMETERS below; bench/results/scale.md has the
method, the table and the verdict.

Two algorithms:
  tl_mlx5 - UCC tl/mlx5's alltoall as published when the reference table was
            measured (openucx/ucc, src/components/tl/mlx5/alltoall/
            alltoall_coll.c, unchanged from c359ad0e, 2023-07, to f99208fa,
            2025-01): shm fan-in of flags at the node's ASR (no data copy: a
            UMR key spans the ranks' buffers), an RDMA-write barrier of the
            ASRs, per destination node (cyclic from itself) one hardware
            transpose WQE (into device memory) and one RDMA write per
            b x b block, then an atomic add; a wait-on-data WQE fires when
            every node's atomic has landed; shm fan-out of a flag.
  mlxa2a  - core/hier: every rank copies its blocks into the node's staging
            area (fan-in), a node sync, the leader writes one message per
            remote node, cyclic from (a + 1) mod N, each rank copies its
            blocks out (fan-out) after a second sync; calls larger than the
            staging slot run in pipelined rounds.

Usage: schedule_sim.py [--check] [--check-claim SCALE_MD README_MD] [--params]
  (no option)   the seed against the simulated tl/mlx5 column, and the
                mlxa2a column only if every size is within +-35%
  --check       exit 1 unless the tl/mlx5 column is within +-35% at 1-128 B
  --check-claim exit 1 if SCALE_MD's verdict line disagrees with the
                simulation, or, while it does not reproduce the seed, if
                SCALE_MD or README_MD quotes a predicted mlxa2a time
"""
import heapq
import math
import re
import sys
from dataclasses import dataclass, field

# --- Parameters -----------------------------------------------------------

C6 = ("NVIDIA ConnectX-6 adapter documentation, Introduction "
      "(docs.nvidia.com/networking/display/ConnectX6EN/Introduction), as "
      "bench/model_bench quotes it: \"up to two ports of 200Gb/s ... sub-600ns "
      "latency and 215 million messages per second\"")


@dataclass(frozen=True)
class Hw:
    """ConnectX-6 / HDR figures and the host terms (see PARAMETERS)."""
    link_bytes_per_s: float = 200e9 / 8
    msg_per_s: float = 215e6
    adapter_latency_s: float = 0.6e-6
    switch_hop_s: float = 130e-9
    switch_radix: int = 40
    pcie_bytes_per_s: float = 16e9 * 16 * (128 / 130) / 8
    post_s: float = 105e-9
    mtu: int = 4096
    packet_header_bytes: int = 42
    node_sync_s: float = 1.16e-6
    dm_chunks: int = 0  # tl/mlx5's device-memory chunks; 0: never short (size unknown)
    slot_bytes: int = 128 * 1024


# name, value as printed, kind, source
PARAMETERS = [
    ("link bandwidth", "25 GB/s (200 Gb/s)", "cited", C6),
    ("NIC message rate", "215 M msg/s (4.65 ns per work request)", "cited", C6),
    ("adapter latency", "0.6 us one way", "cited", C6),
    ("switch hop", "130 ns, 40 ports",
     "cited", "NVIDIA Quantum QM8700 HDR switch product brief: 40 x 200 Gb/s "
     "ports, 130 ns port-to-port latency (not re-read in this session)"),
    ("hops between nodes", "1 up to 40 nodes, 3 up to 800, 5 beyond", "derived",
     "a fat tree of 40-port switches: one switch holds 40 nodes, two levels 40 x 20"),
    ("PCIe bandwidth", "31.5 GB/s per direction", "derived",
     "PCIe 4.0 x16, ConnectX-6's host interface (the NVIDIA documentation above): "
     "16 GT/s x 16 lanes x 128/130 encoding / 8; TLP headers not counted"),
    ("work-request post / completion reap (CPU)", "105 ns each", "cited",
     "UCX's own model of an mlx5 device as ucx_info prints it (\"overhead: 105 "
     "nsec\", \"latency: 630 nsec\"), open-mpi/ompi issue 9080; used for posting a "
     "work request with its doorbell, and (no separate figure) for reaping a "
     "completion"),
    ("MTU, packet headers", "4096 B, 42 B per packet", "cited",
     "InfiniBand Architecture Specification vol. 1: LRH 8 + BTH 12 + RETH 16 + "
     "ICRC 4 + VCRC 2 bytes; 4096 the largest IB MTU"),
    ("node synchronisation", "1.16 us each", "derived (measured here)",
     "docs/shm.md: the cheapest flag handoff among this host's ranks, 0.24-1.16 us; "
     "the upper end (32 ranks share one line here, not 2)"),
    ("fan-in / fan-out copy per rank", "bench/results/multi-node.md table", "derived "
     "(measured here)", "bench/model_bench at 23 x 32, CPU-time medians (\"Fan-out "
     "copies\"), scaled by nodes / 23"),
    ("mlxa2a staging slot", "128 KiB per rank", "from the code",
     "MLXA2A_SHM_SLOT_SIZE default (README): one round carries slot / n bytes per peer"),
    ("tl/mlx5 block size", "32 (1-8 B), 16 (16-32 B), 8 (64-128 B)", "from the code",
     "UCC get_block_size(): largest b <= ppn with b * max(pow2(b) * pow2(max(m, 8)), "
     "128) <= 8192 (MAX_TRANSPOSE_SIZE)"),
]

# bench/results/multi-node.md, "Fan-out copies": midpoints, us per rank per call
# at 23 nodes x 32 ranks (current rotated rows).
FAN_IN_US = {1: 0.04, 2: 0.05, 4: 0.22, 8: 0.27, 16: 0.335, 32: 0.685, 64: 0.94, 128: 2.04}
FAN_OUT_US = {1: 0.295, 2: 0.29, 4: 0.505, 8: 0.665, 16: 0.68, 32: 0.65, 64: 1.075,
              128: 2.16}
MEASURED_NODES = 23

# ../shared/reference/seed-table.md: osu_alltoall averages at 23 x 32, us.
SEED_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
SEED_TL_MLX5 = (95.85, 95.76, 100.96, 112.16, 178.82, 201.71, 336.13, 643.67)
SEED_HCOLL = (112.15, 118.68, 139.34, 301.91, 119.70, 235.14, 379.98, 578.52)
SEED_NODES, SEED_PPN = 23, 32
TOLERANCE = 0.35
VERDICT = re.compile(r"^Verdict: tl/mlx5 column (reproduced|not reproduced)", re.M)


# --- Resources ------------------------------------------------------------

class Timeline:
    """A serial resource: a job starts when it is ready and the resource free."""

    def __init__(self):
        self.free = 0.0
        self.busy = 0.0
        self.waited = 0.0  # the longest a job queued here (start - ready)

    def run(self, ready, duration):
        start = max(ready, self.free)
        self.waited = max(self.waited, start - ready)
        self.free = start + duration
        self.busy += duration
        return self.free


def wire_bytes(hw, nbytes):
    packets = max(1, math.ceil(nbytes / hw.mtu))
    return nbytes + packets * hw.packet_header_bytes


def hops(hw, nodes):
    if nodes <= hw.switch_radix:
        return 1
    return 3 if nodes <= hw.switch_radix * hw.switch_radix // 2 else 5


def latency(hw, nodes):
    return hw.adapter_latency_s + hops(hw, nodes) * hw.switch_hop_s


@dataclass
class Nic:
    """One HCA: work-request engine, PCIe both ways, link both ways."""
    hw: Hw
    wqe: Timeline = field(default_factory=Timeline)
    pcie_rd: Timeline = field(default_factory=Timeline)
    pcie_wr: Timeline = field(default_factory=Timeline)
    tx: Timeline = field(default_factory=Timeline)
    rx: Timeline = field(default_factory=Timeline)

    def engine(self, ready):
        return self.wqe.run(ready, 1.0 / self.hw.msg_per_s)

    def dma_read(self, ready, nbytes):
        return self.pcie_rd.run(ready, nbytes / self.hw.pcie_bytes_per_s)

    def transmit(self, ready, nbytes):
        return self.tx.run(ready, wire_bytes(self.hw, nbytes) / self.hw.link_bytes_per_s)

    def send(self, ready, nbytes, dma=True):
        """A write from host memory (dma) or from device memory: its last byte
        leaves the port."""
        t = self.engine(ready)
        if dma:
            t = self.dma_read(t, nbytes)
        return self.transmit(t, nbytes)

    def receive(self, arrival, nbytes):
        """A write arriving at this port: its last byte in host memory."""
        t = self.rx.run(arrival, wire_bytes(self.hw, nbytes) / self.hw.link_bytes_per_s)
        return self.pcie_wr.run(t, nbytes / self.hw.pcie_bytes_per_s)


def land_all(nics, arrivals):
    """arrivals: (time, receiver, bytes, tag); each receiver's link takes them
    in arrival order. Returns {(receiver, tag): landed time}."""
    landed = {}
    for t, dst, nbytes, tag in sorted(arrivals, key=lambda a: (a[0], a[1])):
        landed[(dst, tag)] = nics[dst].receive(t, nbytes)
    return landed


# --- mlxa2a ----------------------------------------------------------------

def cyclic_order(a, nodes):
    """mlxa2a's send order (Plan::target): (a + 1) mod N, then on, cyclically."""
    return [(a + k) % nodes for k in range(1, nodes)]


def node_order(a, nodes):
    """The order before issue 39 item 3: node 0 first - every leader at once."""
    return [d for d in range(nodes) if d != a]


def table_us(table, m):
    """The measured per-rank copy time at m bytes, interpolated between sizes."""
    sizes = sorted(table)
    if m <= sizes[0]:
        return table[sizes[0]]
    for lo, hi in zip(sizes, sizes[1:]):
        if m <= hi:
            return table[lo] + (table[hi] - table[lo]) * (m - lo) / (hi - lo)
    return table[sizes[-1]] * m / sizes[-1]


def copy_s(table, nodes, chunk):
    """One rank's fan-in or fan-out of one round: the time measured at 23
    nodes scaled to the node count (a rank copies one run per node). A round
    stages at most slot x ppn bytes per node (4 MiB at 32 ranks), taken as
    cache-resident: no DRAM term (bench/results/scale.md)."""
    return table_us(table, chunk) * 1e-6 * nodes / MEASURED_NODES


def leader_exchange(hw, nodes, msg_bytes, ready, order=cyclic_order, symmetric=True):
    """Every leader posts one write per remote node in `order` from `ready`;
    returns (time the last leader has reaped all arrivals, max receive-link
    queueing in s). symmetric: simulate node 0 only - exact when `order` is a
    rotation (node a's k-th target is a + c_k), as each receiver then gets
    one message per step, at the times node 0's own messages leave."""
    lat = latency(hw, nodes)
    senders = [0] if symmetric else range(nodes)
    nics = {a: Nic(hw) for a in range(nodes if not symmetric else 1)}
    arrivals, posted = [], {}
    for a in senders:
        cpu = ready
        for k, d in enumerate(order(a, nodes)):
            cpu += hw.post_s
            out = nics[a].send(cpu, msg_bytes)
            dst = 0 if symmetric else d
            arrivals.append((out + lat, dst, msg_bytes, (a, k)))
        posted[a] = cpu
    landed = land_all(nics, arrivals)
    done = 0.0
    for r in nics:
        last = max(t for (dst, _), t in landed.items() if dst == r)
        reaped = posted.get(r, ready) + (nodes - 1) * hw.post_s
        done = max(done, max(last, reaped) + hw.post_s)
    return done, max(n.rx.waited for n in nics.values())


def mlxa2a_rounds(hw, nodes, ppn, m):
    """(rounds, bytes per peer per round): slot / n bytes per peer fit a round."""
    per_round = max(1, hw.slot_bytes // (nodes * ppn))
    chunk = min(m, per_round)
    return math.ceil(m / chunk), chunk


def mlxa2a_call(hw, nodes, ppn, m, order=cyclic_order, symmetric=True):
    """One call's time and its parts (s). Rounds after the first overlap: each
    adds its slowest stage, the ranks' copies or the leader's exchange."""
    rounds, chunk = mlxa2a_rounds(hw, nodes, ppn, m)
    fan_in = copy_s(FAN_IN_US, nodes, chunk)
    fan_out = copy_s(FAN_OUT_US, nodes, chunk)
    ready = fan_in + hw.node_sync_s
    done, queued = leader_exchange(hw, nodes, ppn * ppn * chunk, ready, order, symmetric)
    exchange = done - ready
    first = done + hw.node_sync_s + fan_out
    stage = max(fan_in + fan_out + 2 * hw.node_sync_s, exchange)
    total = first + (rounds - 1) * stage
    return total, {"rounds": rounds, "chunk": chunk, "fan_in": fan_in, "fan_out": fan_out,
                   "exchange": exchange, "syncs": 2 * hw.node_sync_s, "rx_queued": queued}


# --- UCC tl/mlx5 ------------------------------------------------------------

def pow2_at_least(v):
    """UCC's power2(): the smallest power of two >= v, at least 2."""
    p = 2
    while p < v:
        p *= 2
    return p


def ucc_block_size(ppn, m):
    """UCC tl/mlx5 get_block_size() (2023-07 to 2025-01): the transpose unit
    takes at most 8192 bytes (MAX_TRANSPOSE_SIZE), elements of at most 128."""
    eff = pow2_at_least(max(m, 8))
    b = ppn
    while b > 1 and b * max(pow2_at_least(b) * eff, 128) > 8192:
        b -= 1
    return max(1, b)


def tl_barrier(hw, nodes, start):
    """The ASRs' barrier: each writes its flag to every other node in node
    order 0..N-1, one work request and doorbell each. Returns (cpu time after
    posting per node, flag_at[a][j]: when node a holds node j's flag)."""
    lat = latency(hw, nodes)
    nics = [Nic(hw) for _ in range(nodes)]
    cpu_after, flag_at = [], [[0.0] * nodes for _ in range(nodes)]
    for j in range(nodes):
        cpu = start
        flag_at[j][j] = start
        for i in range(nodes):
            if i == j:
                continue
            cpu += hw.post_s
            flag_at[i][j] = nics[j].send(cpu, 8) + lat
        cpu_after.append(cpu)
    return cpu_after, flag_at, nics


def tl_post_node(hw, nodes, ppn, m, a, cpu, flags, nic):
    """Node a's send_blocks: destinations cyclic from itself, each taken once
    its barrier flag is in (a progress pass skips the others and comes back).
    Per b x b block: a transpose WQE (the NIC reads the block over PCIe into
    device memory) and an RDMA write from device memory, then one atomic per
    destination. With hw.dm_chunks, a remote block needs a free device-memory
    chunk: one is freed when an earlier write's completion (its ACK) is polled.
    Returns (cpu time, arrivals, local landings, blocks sent)."""
    b = ucc_block_size(ppn, m)
    nblocks = (ppn // b) ** 2
    block = b * b * m
    lat = latency(hw, nodes)
    pending = [(a + i) % nodes for i in range(nodes)]
    arrivals, local, sent = [], [], 0
    chunks = [0.0] * hw.dm_chunks  # when each chunk is free again
    while pending:
        ready = [d for d in pending if flags[d] <= cpu]
        if not ready:
            cpu = min(flags[d] for d in pending)
            continue
        for d in ready:
            pending.remove(d)
            for k in range(nblocks):
                if hw.dm_chunks and d != a:
                    free = heapq.heappop(chunks)
                    if free > cpu:  # poll the CQ until an earlier write completes
                        cpu = free + hw.post_s
                cpu += 2 * hw.post_s
                t = nic.dma_read(nic.engine(cpu), block)  # transpose into DM
                if d == a:  # the self block is transposed straight to the receive buffers
                    local.append(nic.pcie_wr.run(t, block / hw.pcie_bytes_per_s))
                    continue
                out = nic.transmit(nic.engine(t), block)
                if hw.dm_chunks:
                    heapq.heappush(chunks, out + 2 * lat)
                arrivals.append((out + lat, d, block, ("blk", a, k)))
                sent += 1
            cpu += hw.post_s
            out = nic.transmit(nic.engine(cpu), 8)
            if d == a:
                local.append(out)
            else:
                arrivals.append((out + lat, d, 8, ("atomic", a)))
    return cpu, arrivals, local, sent


def tl_mlx5_call(hw, nodes, ppn, m):
    """One tl/mlx5 call (s) and its parts, every node simulated."""
    lat = latency(hw, nodes)
    fan_in = hw.node_sync_s  # ranks publish their seq_num; the ASR polls them
    cpu_after, flag_at, nics = tl_barrier(hw, nodes, fan_in)
    arrivals, posted = [], []
    for a in range(nodes):
        cpu, arr, local, sent = tl_post_node(hw, nodes, ppn, m, a, cpu_after[a], flag_at[a],
                                             nics[a])
        arrivals += arr
        posted.append((cpu, local, sent))
    landed = land_all(nics, arrivals)
    total, parts = 0.0, {}
    for r in range(nodes):
        cpu, local, sent = posted[r]
        atomics = [t for (dst, tag), t in landed.items() if dst == r and tag[0] == "atomic"]
        data_in = max(atomics + local)                   # wait-on-data's counter reaches N
        acked = nics[r].tx.free + 2 * lat                 # the last write's ACK is back
        reaped = cpu + sent * hw.post_s                   # one CQE per signalled write
        done = max(data_in + 1.0 / hw.msg_per_s, acked, reaped) + hw.post_s + hw.node_sync_s
        if done > total:
            total = done
            parts = {"barrier_posted": cpu_after[r], "posted": cpu, "data_in": data_in,
                     "acked": acked, "reaped": reaped, "rx_queued": nics[r].rx.waited,
                     "block": ucc_block_size(ppn, m)}
    return total, parts


# --- Reports ----------------------------------------------------------------

def tl_mlx5_column(hw=Hw()):
    """Simulated tl/mlx5 at the seed's layout, us per size."""
    return [tl_mlx5_call(hw, SEED_NODES, SEED_PPN, m)[0] * 1e6 for m in SEED_SIZES]


def within(sim, seed, tol=TOLERANCE):
    return abs(sim / seed - 1.0) <= tol


def reproduced(column):
    return all(within(s, r) for s, r in zip(column, SEED_TL_MLX5))


def residual_fit(column):
    """Least squares seed - sim = A + B*m (us, us per byte per peer): what the
    simulation lacks, described - never added to it."""
    xs = list(SEED_SIZES)
    ys = [r - s for s, r in zip(column, SEED_TL_MLX5)]
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b, ys


def print_params():
    print("| parameter | value | kind | source |")
    print("|---|---|---|---|")
    for name, value, kind, source in PARAMETERS:
        print(f"| {name} | {value} | {kind} | {source} |")


def print_seed_table(column):
    print("| bytes | seed tl/mlx5 (us) | simulated tl/mlx5 (us) | sim/seed | within +-35% "
          "| block b | seed HCOLL (us) |")
    print("|---:|---:|---:|---:|---|---:|---:|")
    for m, sim, seed, hc in zip(SEED_SIZES, column, SEED_TL_MLX5, SEED_HCOLL):
        ok = "yes" if within(sim, seed) else "no"
        print(f"| {m} | {seed:.2f} | {sim:.1f} | {sim / seed:.2f} | {ok} | "
              f"{ucc_block_size(SEED_PPN, m)} | {hc:.2f} |")


def print_dm_sensitivity(sizes=(1, 2, 4, 8, 15)):
    """tl/mlx5's device-memory pool, whose size at the seed is not known: the
    column with K chunks - a sensitivity, not a fit (the verdict uses Hw())."""
    print("| DM chunks | " + " | ".join(f"{m} B" for m in SEED_SIZES) + " |")
    print("|---:|" + "---:|" * len(SEED_SIZES))
    for k in sizes:
        hw = Hw(dm_chunks=k)
        cells = [tl_mlx5_call(hw, SEED_NODES, SEED_PPN, m)[0] * 1e6 for m in SEED_SIZES]
        print(f"| {k} | " + " | ".join(f"{c:.0f} ({c / r:.2f})" for c, r in
                                       zip(cells, SEED_TL_MLX5)) + " |")


def print_mlxa2a(hw=Hw()):
    print("| ranks | bytes | predicted (us) | rounds | fan-in | exchange | fan-out | syncs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for nodes in (23, 128, 4096):
        for m in SEED_SIZES:
            t, p = mlxa2a_call(hw, nodes, SEED_PPN, m)
            print(f"| {nodes} x {SEED_PPN} | {m} | {t * 1e6:.1f} | {p['rounds']} | "
                  f"{p['fan_in'] * 1e6:.2f} | {p['exchange'] * 1e6:.1f} | "
                  f"{p['fan_out'] * 1e6:.2f} | {p['syncs'] * 1e6:.2f} |")


QUOTE = re.compile(r"(predict|model)[^\n]*\d[\d.,]*\s*(µs|us)\b", re.I)


def claim_errors(column, scale_text, readme_text):
    """Why the written claims disagree with the simulation ([] if they agree)."""
    ok = reproduced(column)
    m = VERDICT.search(scale_text)
    if not m:
        return ["scale.md has no 'Verdict: tl/mlx5 column ...' line"]
    errors = []
    if (m.group(1) == "reproduced") != ok:
        errors.append(f"scale.md says '{m.group(1)}', the simulation says "
                      f"'{'reproduced' if ok else 'not reproduced'}'")
    if not ok:
        for name, text in (("scale.md", scale_text), ("README", readme_text)):
            for line in text.splitlines():
                if "mlxa2a" in line and QUOTE.search(line):
                    errors.append(f"{name} quotes an unvalidated prediction: {line.strip()[:100]}")
    return errors


def main(argv):
    column = tl_mlx5_column()
    if "--check" in argv:
        ok = reproduced(column)
        print("tl/mlx5 column", "reproduced" if ok else "NOT reproduced", "within +-35%:",
              ", ".join(f"{m} B {s:.1f}/{r:.1f}" for m, s, r in
                        zip(SEED_SIZES, column, SEED_TL_MLX5)))
        return 0 if ok else 1
    if "--check-claim" in argv:
        i = argv.index("--check-claim")
        with open(argv[i + 1], encoding="utf-8") as f, open(argv[i + 2], encoding="utf-8") as g:
            errors = claim_errors(column, f.read(), g.read())
        for e in errors:
            print("FAIL:", e)
        print("claims agree with the simulation" if not errors else f"{len(errors)} failed")
        return 1 if errors else 0
    if "--params" in argv:
        print_params()
        return 0
    print_seed_table(column)
    ok = reproduced(column)
    print(f"\nVerdict: tl/mlx5 column {'reproduced' if ok else 'not reproduced'} "
          f"(+-{TOLERANCE:.0%} at every size 1-128 B)")
    a, b, ys = residual_fit(column)
    print("seed - simulated (us):", ", ".join(f"{y:.1f}" for y in ys))
    print(f"as A + B*m: A = {a:.1f} us, B = {b:.2f} us per byte per peer")
    if ok:
        print()
        print_mlxa2a()
    else:
        print("mlxa2a's column is not printed: the tl/mlx5 column does not reproduce the seed")
        print("\nSensitivity to tl/mlx5's device-memory chunks, us (sim/seed):")
        print_dm_sensitivity()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
