#!/usr/bin/env python3
"""The leaders' exchange over RDMA vs over PMPI, side by side, on one host.

Both modes run the hierarchical engine with mlxa2a on the same virtual-node
layout (MLXA2A_DEBUG_NODE_SIZE); they differ only in the leaders' transport:
RDMA through a verbs library given by path (fakeverbs here, whose writes are
process_vm_writev calls: absolute times mean nothing) or PMPI point-to-point
(a verbs library that does not exist). Runs alternate (pmpi, rdma, pmpi, ...)
so drift hits both alike. Per mode and size it prints the median over rounds
of osu_alltoall's average latency and the CPU time per call: the job's CPU time
(user + system of mpirun and everything it started, from getrusage) of a run of
3N iterations minus that of a run of N, divided by the 2N * np calls between
them, so start-up and MPI_Init cancel out.

--zcopy compares the staged RDMA path (MLXA2A_NET_ZCOPY_THRESHOLD=0) with
zero-copy (threshold 1: the leaders' writes read the ranks' send buffers,
docs/zerocopy.md) instead, both through the verbs library.

--pipeline compares RDMA leaders with rounds one after the other
(MLXA2A_NET_PIPELINE=n) and pipelined (=y, docs/hier.md "Pipelined rounds"),
both through the verbs library; --slot sets MLXA2A_SHM_SLOT_SIZE in both (a
call runs in rounds of slot / np bytes per peer).

Usage: scripts/compare_leaders.py --build DIR [--np 4] [--layout 2]
           [--rounds 5] [--sizes 1:4096 | 1,64,4096] [--iters 200] [--mpi ompi|mpich]
           [--zcopy | --pipeline [--slot 16K]]
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys


def run(args, mode, size, iters):
    b = args.build
    env = dict(os.environ, LD_PRELOAD=f"{b}/shim/libmlxa2a-{args.mpi}.so",
               MLXA2A_DEBUG_NODE_SIZE=args.layout, MLXA2A_TUNE="0-inf:shm", FAKEVERBS_QUIET="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               MLXA2A_NET_ZCOPY_THRESHOLD="1" if mode == "zcopy" else "0",
               MLXA2A_NET_PIPELINE="n" if mode == "serial" else "y")
    if args.slot:
        env["MLXA2A_SHM_SLOT_SIZE"] = args.slot
    if mode == "zcopy":
        env["MLXA2A_TUNE"] = "0-inf:rdma"  # takes zcopy from the threshold up
    env["MLXA2A_NET_VERBS_LIBRARY"] = (f"{b}/tests/fakeverbs/lib/libibverbs.so.1" if mode != "pmpi"
                                       else "libmlxa2a-no-such-verbs.so.1")
    if args.mpi == "ompi":
        cmd = ["mpirun.openmpi", "--oversubscribe", "--bind-to", "none"]
        for k in ("LD_PRELOAD", "MLXA2A_DEBUG_NODE_SIZE", "MLXA2A_TUNE", "FAKEVERBS_QUIET",
                  "MLXA2A_NET_VERBS_LIBRARY", "MLXA2A_NET_ZCOPY_THRESHOLD", "MLXA2A_NET_PIPELINE"):
            cmd += ["-x", k]
        if args.slot:
            cmd += ["-x", "MLXA2A_SHM_SLOT_SIZE"]
    else:
        cmd = ["mpiexec.mpich"]
    warm = 20
    cmd += ["-np", str(args.np), f"{b}/bench/osu_alltoall-{args.mpi}", "-m", f"{size}:{size}",
            "-i", str(iters), "-x", str(warm)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{mode} run failed:\n{p.stdout}\n{p.stderr}")
    m = re.search(r"^\s*%d\s+([\d.]+)" % size, p.stdout, re.M)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(m.group(1)), cpu


def measure(args, mode, size):
    """(latency us of the long run, CPU us per rank-call)."""
    _, short = run(args, mode, size, args.iters)
    lat, long = run(args, mode, size, 3 * args.iters)
    return lat, (long - short) / (2 * args.iters * args.np) * 1e6


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
    ap.add_argument("--slot", default="")
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
          f"iters={args.iters} slot={args.slot or 'default'}; medians; "
          f"CPU us per rank-call (3N-run minus N-run)")
    print(f"# bytes  {base}(us)  {other}(us)  ratio  {base}-cpu(us)  {other}-cpu(us)  cpu-ratio")
    for size in sizes:
        res = {base: [], other: []}
        for _ in range(args.rounds):
            for mode in (base, other):
                res[mode].append(measure(args, mode, size))
        lat = {k: statistics.median(v[0] for v in res[k]) for k in res}
        cpu = {k: statistics.median(v[1] for v in res[k]) for k in res}
        print(f"{size:7d}  {lat[base]:10.2f}  {lat[other]:10.2f}  {lat[other] / lat[base]:5.2f}"
              f"  {cpu[base]:12.2f}  {cpu[other]:12.2f}  {cpu[other] / cpu[base]:9.2f}")


if __name__ == "__main__":
    main()
