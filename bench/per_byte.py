#!/usr/bin/env python3
"""The hierarchical engine's CPU per byte (issue 40 item 3; bench/results/per-byte.md):
callgrind instructions per byte per rank inside MPI_Alltoall, against one
memcpy of the same bytes on this machine.

  per_byte.py --build BUILD [--family ompi|mpich] [--mode rdma|pmpi]... [--size KIB]...
              [--detail]
  per_byte.py --build BUILD --phases   (the phase timer instead, natively)

Jobs as bench/instruction_budget.py's (its launcher, its waits): Open MPI (or
MPICH, --family mpich) np=4 as 2 virtual nodes of 2 (MLXA2A_DEBUG_NODE_SIZE=2), rank 0 a leader, rank 1
not; `rdma`: MLXA2A_TUNE=rdma through fakeverbs, `pmpi`: MLXA2A_TUNE=shm (PMPI
leaders, no verbs). Each size runs N1 and N2 calls; per call = difference /
(N2 - N1). Unlike the budget, which counts the shim's own instructions, this
counts every object's (the copies are libc's memcpy), split by object:

  engine   the shim and the libraries it calls (libc, libstdc++; also libc's
           memcpy when the MPI calls it outside a wait), outside waits
  mpi      the MPI's libraries under the leaders' transport, outside waits
  copies under waits   memcpy/memmove run under a wait (the MPI copying a
           received message while the leader tests it): work, not spinning,
           so counted with the engine's total
  verbs    fakeverbs' code in the calling thread outside waits (posts; its
           CQ polls run under the waits)
  hca      fakeverbs' progress thread (the fake HCA; its data moves by
           process_vm_writev, in the kernel, which callgrind does not see)

and the engine's instructions by step (fan-in, fan-out, exchange: the leader's
transport and what it calls, other). Instructions outside HierAlltoall::run
(dispatch, the first call's set-up, whose collectives spin as long as
valgrind's slowness makes them) are printed as "outside run", not counted. memcpy-equivalents = (engine + mpi + copies
under waits) per byte / memcpy's per byte, memcpy of bytes_per_peer * np bytes
counted by bench/memcpy_loop under the same valgrind. Bytes = bytes_per_peer
* np, one rank's send buffer.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import instruction_budget as ib  # noqa: E402

N1, N2 = 4, 12  # calls; a 1 MiB-per-peer call is ~10^7 instructions under valgrind
NP = 4
SIZES_KIB = (16, 64, 256, 1024)
HCA_THREAD = "fakeverbs::hca::*::run(*"
VALGRIND = ["valgrind", "-q", "--tool=callgrind", "--collect-atstart=no",
            "--toggle-collect=MPI_Alltoall", f"--toggle-collect={HCA_THREAD}",
            "--separate-callers=24", "--compress-strings=no", "--compress-pos=no"]
MODES = {
    "rdma": {k: v for k, v in ib.RDMA_ENV.items() if k != "MLXA2A_SHM_SLOT_SIZE"},
    "pmpi": {"MLXA2A_DEBUG_NODE_SIZE": "2", "MLXA2A_TUNE": "shm"},
}
TRANSPORT = re.compile(r"LeaderTransport::|Relay")
COPY = re.compile(r"^(__)?mem(cpy|move)")
STEPS = (("fan_in", re.compile(r"HierAlltoall::fan_in(_rows<\w+>)?\(")),
         ("fan_out", re.compile(r"HierAlltoall::fan_out(_columns<\w+>)?\(")),
         ("exchange", TRANSPORT))


def kind(ob):
    """Which account an object's instructions go to."""
    if re.search(r"libmpi|libopen-|mca_|openmpi|libmpich|libpmix|libhwloc|libevent|libucs|libucp",
                 ob):
        return "mpi"
    return "engine"


class Costs:
    """One callgrind file's self instructions by account and step."""

    def __init__(self, path):
        self.acct = collections.Counter()
        self.steps = collections.Counter()
        self.fns = collections.Counter()  # (step, function) -> instructions (--detail)
        ob = fn = None
        in_call = False
        for line in open(path):
            key, _, val = line.rstrip("\n").partition("=")
            if key == "ob":
                ob = val
                continue
            if key == "fn":
                fn = val
                continue
            if key == "calls":
                in_call = True  # the next cost line is a call's inclusive cost
                continue
            if not line[:1].isdigit() and not line.startswith("+") and not line.startswith("-"):
                continue
            if in_call:
                in_call = False
                continue
            parts = line.split()
            if len(parts) < 2:
                continue
            self.add(ob or "", fn or "", int(parts[1]))

    def add(self, ob, fn, ir):
        chain = fn.split("'")
        if any(f.startswith("fakeverbs::hca::") and "::run(" in f for f in chain):
            # The fake HCA's thread: executing work requests, or its loop
            # (wake-ups, timed waits: how often depends on timing).
            busy = any(f.startswith("fakeverbs::progress(") for f in chain)
            self.acct["hca" if busy else "hca loop"] += ir
            return
        if not any("HierAlltoall::run(" in f for f in chain):
            # Dispatch and the first call's set-up (its collectives spin as
            # long as valgrind's slowness makes them: not per byte).
            self.acct["outside run"] += ir
            return
        transport = any(TRANSPORT.search(f) for f in chain)
        if any(ib.WAITS.search(f) for f in chain):
            # The MPI copying a received message while the leader tests it
            # is work, not spinning; the rest of a wait (polls of the CQ
            # included) depends on timing.
            if transport and COPY.search(chain[0]):
                self.acct["copies under waits"] += ir
            return
        if any(f.startswith(("fakeverbs::", "ibv_", "mlx5dv_")) for f in chain):
            self.acct["verbs"] += ir  # the provider in the calling thread: posts
            return
        a = kind(ob)
        self.acct[a] += ir
        if a == "engine":
            step = next((name for name, rx in STEPS if any(rx.search(f) for f in chain)), "other")
            self.steps[step] += ir
            self.fns[(step, chain[0])] += ir


def memcpy_per_byte(args, nbytes):
    """glibc memcpy's instructions per byte for one copy of nbytes (memcpy_loop)."""
    prog = args.memcpy_loop or os.path.join(args.build, "bench", "memcpy_loop")
    got = {}
    outdir = tempfile.mkdtemp(prefix="mlxa2a-memcpy-")
    try:
        for n in (N1, N2):
            out = os.path.join(outdir, f"cg.{n}")
            subprocess.run(["valgrind", "-q", "--tool=callgrind", "--collect-atstart=no",
                            "--toggle-collect=copy_once", f"--callgrind-out-file={out}", prog,
                            str(n), str(nbytes)], check=True)
            got[n] = next(int(line.split()[1]) for line in open(out)
                          if line.startswith(("summary:", "totals:")))
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    return (got[N2] - got[N1]) / (N2 - N1) / nbytes


def measure(args, mode, kib):
    """{rank: (Costs difference per call)} for one mode and size."""
    job = ib.Job(f"{mode}-{kib}KiB", args.family, NP, str(kib * 256), "world", MODES[mode],
                 {0: ["leader"], 1: ["other"]})
    costs = {}
    for n in (N1, N2):
        outdir = tempfile.mkdtemp(prefix="mlxa2a-perbyte-")
        try:
            ib.launch(args, job, n, outdir, VALGRIND)
            costs[n] = {r: Costs(os.path.join(outdir, f"cg.{r}")) for r in job.ranks}
        finally:
            shutil.rmtree(outdir, ignore_errors=True)
    per_call = {}
    for r in job.ranks:
        acct = {k: (costs[N2][r].acct[k] - costs[N1][r].acct[k]) / (N2 - N1)
                for k in set(costs[N1][r].acct) | set(costs[N2][r].acct)}
        steps = {k: (costs[N2][r].steps[k] - costs[N1][r].steps[k]) / (N2 - N1)
                 for k in set(costs[N1][r].steps) | set(costs[N2][r].steps)}
        per_call[r] = (acct, steps)
        if args.detail:
            a, b = costs[N1][r].fns, costs[N2][r].fns
            for key in sorted(set(a) | set(b), key=lambda k: a[k] - b[k])[:12]:
                print(f"    rank {r} {key[0]:8} {(b[key] - a[key]) / (N2 - N1):12.0f}  "
                      f"{key[1][:100]}")
    return per_call


PHASES = re.compile(r"\[mlxa2a (\d+):\d+\] coll: stats phases: rounds=(\d+) (.*?) pmpi_leader")


def phases(args, calls=100):
    """Wall time per call of each step (core/hier/phases.h), natively: the
    same jobs without valgrind, MLXA2A_COLL_STATS=1 (docs/hier.md, "Where
    the time goes")."""
    print(f"phase timer, {calls} calls, microseconds per call (rounds per call)")
    for mode in args.mode or ("rdma", "pmpi"):
        for kib in args.size or SIZES_KIB:
            env = dict(MODES[mode], MLXA2A_COLL_STATS="1")
            job = ib.Job(f"{mode}-{kib}KiB", args.family, NP, str(kib * 256), "world", env, {})
            out = ib.launch(args, job, calls, tempfile.gettempdir())
            for m in sorted(PHASES.finditer(out), key=lambda m: int(m.group(1))):
                steps = " ".join(f"{k[:-3]}={int(v) / 1000 / calls:.0f}"
                                 for k, v in (kv.split("=") for kv in m.group(3).split()))
                print(f"{mode:4} {kib:4}K rank {m.group(1)} ({int(m.group(2)) / calls:g}) {steps}",
                      flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--family", choices=("ompi", "mpich"), default="ompi")
    ap.add_argument("--mode", action="append", choices=sorted(MODES))
    ap.add_argument("--size", action="append", type=int, help="KiB per peer")
    ap.add_argument("--detail", action="store_true", help="the engine's largest functions")
    ap.add_argument("--memcpy-loop", help="bench/memcpy_loop binary (default: BUILD's)")
    ap.add_argument("--phases", action="store_true", help="the phase timer instead, natively")
    args = ap.parse_args()
    if args.phases:
        phases(args)
        return 0
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed")
        return 77
    print(f"{'MPICH' if args.family == 'mpich' else 'Open MPI'} np={NP}, 2 virtual nodes of 2; instructions per byte per rank "
          f"(bytes = KiB per peer x {NP}); calls {N1} and {N2}")
    print("mode size  rank    memcpy/B | engine   mpi  w-copy  total  memcpy-eq | fan_in "
          "fan_out exch  other | verbs    hca")
    for mode in args.mode or ("rdma", "pmpi"):
        for kib in args.size or SIZES_KIB:
            nbytes = kib * 1024 * NP
            mc = memcpy_per_byte(args, nbytes)
            for r, (acct, steps) in sorted(measure(args, mode, kib).items()):
                per = {k: v / nbytes for k, v in acct.items()}
                st = {k: v / nbytes for k, v in steps.items()}
                total = per.get("engine", 0) + per.get("mpi", 0) + per.get("copies under waits", 0)
                print(f"{mode:4} {kib:4}K {'leader' if r == 0 else 'other':6} {mc:9.3f} | "
                      f"{per.get('engine', 0):6.3f} {per.get('mpi', 0):5.3f} "
                      f"{per.get('copies under waits', 0):6.3f} {total:6.3f} {total / mc:9.2f} | "
                      f"{st.get('fan_in', 0):6.3f} {st.get('fan_out', 0):6.3f} "
                      f"{st.get('exchange', 0):5.3f} {st.get('other', 0):6.3f} | "
                      f"{per.get('verbs', 0):5.3f} {per.get('hca', 0):6.3f} "
                      f"(loop {per.get('hca loop', 0):.3f}, outside run "
                      f"{per.get('outside run', 0):.3f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
