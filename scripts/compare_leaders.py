#!/usr/bin/env python3
"""The leaders' exchange over RDMA vs over PMPI, side by side, on one host.

Both modes run the hierarchical engine with mlxa2a on the same virtual-node
layout (MLXA2A_DEBUG_NODE_SIZE); they differ only in the leaders' transport:
RDMA through a verbs library given by path (fakeverbs here, whose writes are
process_vm_writev calls: absolute times mean nothing) or PMPI point-to-point
(a verbs library that does not exist). Runs alternate (pmpi, rdma, pmpi, ...)
so drift hits both alike. Per mode and size it prints medians over rounds of:

  lat   osu_alltoall's average latency (us);
  call  CPU per rank-call inside MPI_Alltoall: the calling threads' own CPU
        clocks (osu_alltoall -C), so neither fakeverbs' progress thread (the
        fake NIC: DMA, placement, completions) nor MPI_Init, barriers or
        start-up are in it;
  busy  call minus the CPU those threads spent waiting inside mlxa2a (for
        peers' flags and for RDMA completions: "stats waits: cpu_ns" of
        MLXA2A_COLL_STATS, core/wait_cpu.h), i.e. the work a real NIC would
        leave on the host - copies, registration look-ups, posting. The waits
        are taken out because the fake NIC is far slower than a real one;
  net   busy minus the CPU the ranks' threads spent in fakeverbs'
        ibv_post_send (FAKEVERBS_CPU_FILE's post_cpu_ns): the fake validates
        and counts every SGE under a shared lock, a real provider writes a
        WQE. Closest to what a ConnectX would leave on the host (what stays
        in it: tests/fakeverbs/FIDELITY.md, "Measuring CPU on the fake");
  nic   fakeverbs' progress-thread CPU per rank-call (FAKEVERBS_CPU_FILE),
        for information: the work the fake moved off the ranks.

Every call, warm-up included, counts (the wait counter cannot tell them
apart). FAKEVERBS_JITTER_US=0 keeps the fake's made-up per-WR delay out.

--zcopy compares the staged RDMA path (MLXA2A_NET_ZCOPY_THRESHOLD=0) with
zero-copy (threshold 1: the leaders' writes read the ranks' send buffers,
docs/zerocopy.md) instead, both through the verbs library.

--pipeline compares RDMA leaders with rounds one after the other
(MLXA2A_NET_PIPELINE=n) and pipelined (=y, docs/hier.md "Pipelined rounds"),
both through the verbs library (with --pmpi-leaders: both over PMPI
point-to-point instead); --slot sets MLXA2A_SHM_SLOT_SIZE in both (a call
runs in rounds of slot / np bytes per peer).

--bytes-budget B caps the iterations at B / bytes (at least 10), so a sweep
up to 1 MiB per peer stays short.

Usage: scripts/compare_leaders.py --build DIR [--np 4] [--layout 2]
           [--rounds 5] [--sizes 1:4096 | 1,64,4096] [--iters 200] [--mpi ompi|mpich]
           [--zcopy | --pipeline [--pmpi-leaders] [--slot 16K]] [--bytes-budget B]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run(args, mode, size, iters):
    b = args.build
    env = dict(os.environ, LD_PRELOAD=f"{b}/shim/libmlxa2a-{args.mpi}.so",
               MLXA2A_DEBUG_NODE_SIZE=args.layout, MLXA2A_TUNE="0-inf:shm", FAKEVERBS_QUIET="1",
               MLXA2A_COLL_STATS="1", FAKEVERBS_JITTER_US="0",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               MLXA2A_NET_ZCOPY_THRESHOLD="1" if mode == "zcopy" else "0",
               MLXA2A_NET_PIPELINE="n" if mode == "serial" else "y")
    if args.slot:
        env["MLXA2A_SHM_SLOT_SIZE"] = args.slot
    if mode == "zcopy":
        env["MLXA2A_TUNE"] = "0-inf:rdma"  # takes zcopy from the threshold up
    pmpi = mode == "pmpi" or (args.pmpi_leaders and mode in ("serial", "pipelined"))
    env["MLXA2A_NET_VERBS_LIBRARY"] = ("libmlxa2a-no-such-verbs.so.1" if pmpi
                                       else f"{b}/tests/fakeverbs/lib/libibverbs.so.1")
    if args.mpi == "ompi":
        cmd = ["mpirun.openmpi", "--oversubscribe", "--bind-to", "none"]
        for k in ("LD_PRELOAD", "MLXA2A_DEBUG_NODE_SIZE", "MLXA2A_TUNE", "FAKEVERBS_QUIET",
                  "FAKEVERBS_CPU_FILE", "FAKEVERBS_JITTER_US", "MLXA2A_COLL_STATS",
                  "MLXA2A_NET_VERBS_LIBRARY", "MLXA2A_NET_ZCOPY_THRESHOLD", "MLXA2A_NET_PIPELINE"):
            cmd += ["-x", k]
        if args.slot:
            cmd += ["-x", "MLXA2A_SHM_SLOT_SIZE"]
    else:
        cmd = ["mpiexec.mpich"]
    warm = 20
    cmd += ["-np", str(args.np), f"{b}/bench/osu_alltoall-{args.mpi}", "-C", "-m", f"{size}:{size}",
            "-i", str(iters), "-x", str(warm)]
    with tempfile.NamedTemporaryFile(prefix="mlxa2a-hca-cpu-") as f:
        env["FAKEVERBS_CPU_FILE"] = f.name
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=900)
        report = open(f.name).read()
        nic_ns = sum(int(x) for x in re.findall(r"hca_cpu_ns (\d+)", report))
        post_ns = sum(int(x) for x in re.findall(r"post_cpu_ns (\d+)", report))
    if p.returncode != 0:
        sys.exit(f"{mode} run failed:\n{p.stdout}\n{p.stderr}")
    m = re.search(r"^\s*%d\s+([\d.]+)" % size, p.stdout, re.M)
    c = re.search(r"^# thread-cpu %d (\d+) ([\d.]+)" % size, p.stdout, re.M)
    waits = [int(x) for x in re.findall(r"stats waits: cpu_ns=(\d+)", p.stderr + p.stdout)]
    if not m or not c or len(waits) != args.np:
        sys.exit(f"{mode} run: unexpected output:\n{p.stdout}\n{p.stderr}")
    calls = int(c.group(1))
    call_ns = float(c.group(2))
    busy_ns = call_ns - sum(waits)
    return (float(m.group(1)), call_ns / calls / 1e3, busy_ns / calls / 1e3,
            (busy_ns - post_ns) / calls / 1e3, nic_ns / calls / 1e3)


def iters_for(args, size):
    if args.bytes_budget:
        return max(10, min(args.iters, args.bytes_budget // size))
    return args.iters


def measure(args, mode, size):
    """(latency us, call CPU, busy CPU, net CPU, fake-NIC CPU: us per rank-call)."""
    return run(args, mode, size, iters_for(args, size))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--layout", default="2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1:4096")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--mpi", default="ompi", choices=["ompi", "mpich"])
    ap.add_argument("--zcopy", action="store_true")
    ap.add_argument("--pipeline", action="store_true")
    ap.add_argument("--pmpi-leaders", action="store_true")
    ap.add_argument("--slot", default="")
    ap.add_argument("--bytes-budget", type=int, default=0)
    args = ap.parse_args()
    base, other = (("rdma", "zcopy") if args.zcopy else
                   ("serial", "pipelined") if args.pipeline else ("pmpi", "rdma"))
    if ":" in args.sizes:
        lo, hi = (int(x) for x in args.sizes.split(":"))
        sizes = []
        while lo <= hi:
            sizes.append(lo)
            lo *= 2
    else:
        sizes = [int(x) for x in args.sizes.split(",")]
    print(f"# {args.mpi} np={args.np} layout={args.layout} rounds={args.rounds} "
          f"iters<={args.iters} budget={args.bytes_budget} slot={args.slot or 'default'}"
          f"{' leaders=pmpi' if args.pmpi_leaders else ''}; "
          f"medians; us per rank-call")
    print(f"# bytes  lat:{base} {other} ratio  busy-cpu:{base} {other} ratio"
          f"  net-cpu:{base} {other} ratio  call-cpu:{base} {other}  nic-cpu:{base} {other}",
          flush=True)
    for size in sizes:
        res = {base: [], other: []}
        for _ in range(args.rounds):
            for mode in (base, other):
                res[mode].append(measure(args, mode, size))
        lat, call, busy, net, nic = [{k: statistics.median(v[i] for v in res[k]) for k in res}
                                     for i in range(5)]

        def trio(d):
            ratio = d[other] / d[base] if d[base] else float("nan")
            return f"{d[base]:10.2f} {d[other]:10.2f} {ratio:5.2f}"

        def pair(d):
            return f"{d[base]:9.2f} {d[other]:9.2f}"
        print(f"{size:7d}  {trio(lat)}  {trio(busy)}  {trio(net)}  {pair(call)}  {pair(nic)}",
              flush=True)

if __name__ == "__main__":
    main()
