#!/usr/bin/env python3
"""Instruction budgets (issue 40 item 5; bench/results/budgets.md): counts the
shim's instructions per MPI_Alltoall call with callgrind and fails if a case
costs more than its budget (bench/instruction_budgets.py).

Each job runs bench/a2a_loop twice, N1 and N2 calls; only the measured ranks
run under valgrind, the others natively (a wrapper picks by the launcher's
rank variable). Callgrind collects only inside MPI_Alltoall, with each
function's callers kept apart (--separate-callers), so that instructions under
a wait can be left out whatever called it: a wait's loop count depends on
timing, everything else in a call does not. Per call = (I(N2) - I(N1)) /
(N2 - N1): the one-time set-up cancels.

  instruction_budget.py --build BUILD [--report] [--repeat R] [--detail] [--case NAME]...

--report prints the counts without failing; --repeat runs every job R times
(to show that the counts do not depend on timing); --detail prints each
function's share; --case runs only the jobs measuring NAME. Exit 77 without
valgrind or for a build other than scripts/build.sh's (release, no LTO).
"""
import argparse
import bisect
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fakeverbs"))
from instruction_budgets import BUDGETS  # noqa: E402
import leftovers  # noqa: E402

N1, N2 = 100, 300  # calls; valgrind is ~50x slower, the difference is what counts
TIMEOUT = 300

# Functions whose loops wait for other processes (or the fake HCA): whatever
# runs under them is left out. Their callers' few instructions around an
# out-of-line wait that is entered or not remain (the budgets' +10).
WAITS = re.compile(r"::Waiter::wait_(slow|impl|until)\(|::NodeAlltoall::wait_lines\("
                   r"|LeaderTransport::(complete|complete_relayed|send_credits)\("
                   r"|::Containment::wait\(")
POST = re.compile(r"::RdmaLeaderTransport::post\(")
# Every poll of the CQ (EndpointPool::poll and try_poll: issue 39's poll
# token, then the drain) is one call of poll_once.
POLL = re.compile(r"::EndpointPool::poll_once\(")

# Jobs: one launch each (per N); `ranks` maps a measured rank to its cases.
Job = collections.namedtuple("Job", "name family np size comm env ranks")
# No keep-alive within a run (24 h): a wait stretched past 2 s by valgrind on
# a loaded machine would add its writes' completions to the counted poll.
RDMA_ENV = {"MLXA2A_DEBUG_NODE_SIZE": "2", "MLXA2A_TUNE": "rdma", "FAKEVERBS_QUIET": "1",
            "MLXA2A_SHM_SLOT_SIZE": "16K", "MLXA2A_NET_TIMEOUT": "20000",
            "MLXA2A_NET_KEEPALIVE": "86400000"}
JOBS = [
    Job("fallthrough-ompi", "ompi", 1, "1", "self", {"MLXA2A_TUNE": "pmpi"},
        {0: ["fallthrough-ompi"]}),
    Job("fallthrough-mpich", "mpich", 1, "1", "self", {"MLXA2A_TUNE": "pmpi"},
        {0: ["fallthrough-mpich"]}),
    Job("shm-1B", "ompi", 2, "1B", "world", {"MLXA2A_TUNE": "shm"}, {0: ["shm-np2-1B"]}),
    Job("shm-64KiB", "ompi", 2, "16384", "world", {"MLXA2A_TUNE": "shm"},
        {0: ["shm-np2-64KiB"]}),
    Job("hier-pmpi", "ompi", 4, "2", "world", {"MLXA2A_DEBUG_NODE_SIZE": "2", "MLXA2A_TUNE": "shm"},
        {0: ["hier-pmpi-leader"], 1: ["hier-pmpi-other"]}),
    Job("rdma", "ompi", 4, "2", "world", RDMA_ENV,
        {0: ["rdma-post", "rdma-poll-completions", "rdma-poll-empty"]}),
]

VALGRIND = ["valgrind", "-q", "--tool=callgrind", "--collect-atstart=no",
            "--toggle-collect=MPI_Alltoall", "--separate-callers=8", "--dump-instr=yes",
            "--compress-strings=no", "--compress-pos=no"]


def launch(args, job, iters, outdir, valgrind=None):
    """Runs a2a_loop ITERS times under the family's launcher; the measured ranks
    under callgrind (outdir/cg.RANK), with VALGRIND's options unless
    `valgrind` gives others (bench/per_byte.py)."""
    prog = [os.path.join(args.build, "bench", f"a2a_loop-{job.family}"), str(iters), job.size,
            job.comm]
    shim = os.path.join(args.build, "shim", f"libmlxa2a-{job.family}.so")
    measured = " ".join(map(str, job.ranks))
    # Open MPI names the rank OMPI_COMM_WORLD_RANK, MPICH's hydra PMI_RANK.
    wrap = ('r=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; for m in ' + measured + '; do '
            '[ "$r" = "$m" ] && exec ' + " ".join(map(shlex.quote, valgrind or VALGRIND)) +
            f' --callgrind-out-file={outdir}/cg.$r "$@"; done; exec "$@"')
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLXA2A_")}
    extra = dict(job.env, LD_PRELOAD=shim)
    if "FAKEVERBS_QUIET" in extra:
        extra["MLXA2A_NET_VERBS_LIBRARY"] = os.path.join(args.build, "tests", "fakeverbs", "lib",
                                                         "libibverbs.so.1")
    env.update(extra)
    if job.family == "ompi":
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = ["mpirun.openmpi", "--oversubscribe", "--bind-to", "none"]
        for k in extra:
            cmd += ["-x", k]
        cmd += ["-np", str(job.np)]
    else:
        cmd = ["mpiexec.mpich", "-n", str(job.np)]
    cmd += ["sh", "-c", wrap, "sh"] + prog
    with leftovers.run_dir() as fv_dir:
        env["FAKEVERBS_DIR"] = fv_dir
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=TIMEOUT)
    if p.returncode != 0:
        sys.exit(f"FAIL: {job.name} ({iters} calls) exited {p.returncode}:\n{p.stdout}")
    return p.stdout


SHIM_OB = re.compile(r"libmlxa2a-\w+\.so$")


def block_edges(shim):
    """Where the shim's basic blocks begin (jump targets, the instruction after
    a jump) and its jumps' addresses, from its disassembly (objdump): a wait
    call's block is then known exactly, whether or not its branches were taken."""
    starts, jumps = set(), set()
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", shim], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    prev_jump = False
    for m in re.finditer(r"^\s+([0-9a-f]+):\s+(\S+)\s*([0-9a-f]*)", out, re.M):
        addr = int(m.group(1), 16)
        if prev_jump:
            starts.add(addr)
        prev_jump = m.group(2).startswith("j")
        if prev_jump:
            jumps.add(addr)
            if m.group(3):
                starts.add(int(m.group(3), 16))
    return sorted(starts), sorted(jumps)


class Profile:
    """A callgrind output file (uncompressed names and positions, --dump-instr):
    the shim's self instructions per (function with its callers, address),
    how often each context called a wait, and how often poll was called."""

    def __init__(self, path, edges):
        self.edges = edges
        self.ir = collections.defaultdict(collections.Counter)  # "fn'caller'..." -> addr -> Ir
        self.wait_calls = collections.defaultdict(list)  # context -> [(call address, count)]
        self.poll_calls = 0
        ob = fn = cfn = None
        in_call = None  # the calls= line before a call's cost line
        for line in open(path):
            key, _, val = line.rstrip("\n").partition("=")
            if key in ("ob", "fn", "cfn"):
                ob, fn, cfn = (val, fn, cfn) if key == "ob" else \
                    (ob, val, cfn) if key == "fn" else (ob, fn, val.split("'")[0])
                continue
            if key == "calls":
                in_call = int(val.split()[0])  # the next cost line is the callee's inclusive cost
                if POLL.search(cfn):
                    self.poll_calls += in_call
                continue
            if not line.startswith("0x") or len(line.split()) < 3:
                continue  # also a jump's source position (no cost)
            if in_call is not None:
                if SHIM_OB.search(ob or "") and WAITS.search(cfn):
                    self.wait_calls[fn].append((int(line.split()[0], 16), in_call))
                in_call = None
                continue
            if SHIM_OB.search(ob or ""):
                addr, _line, ir = line.split()[:3]  # positions: instr line; then Ir
                self.ir[fn][int(addr, 16)] += int(ir)

    def _counted(self, fn):
        """fn's instructions outside waits. Where fn called a wait C times from
        address A, the instructions of A's basic block (the call's argument
        set-up, from the last branch before A, and its status test, up to the
        next jump) ran only because the peer was late: left out with the wait
        (those that ran exactly C times: a block entered also otherwise stays)."""
        if any(WAITS.search(f) for f in fn.split("'")):
            return 0
        starts, jumps = self.edges
        spans = []  # [first, last] address of each wait call's block, and its count
        for a, c in self.wait_calls.get(fn, []):
            first = starts[bisect.bisect_right(starts, a) - 1] if starts and starts[0] <= a else a
            i = bisect.bisect_right(jumps, a)
            spans.append((first, jumps[i] if i < len(jumps) else a, c))

        def entered_only(addr, ir):
            return any(f <= addr <= l and ir == c for f, l, c in spans)
        return sum(ir for addr, ir in self.ir[fn].items() if not entered_only(addr, ir))

    def shim(self, under=None):
        """Self instructions of the shim's functions outside every wait,
        optionally only those under a function matching `under`."""
        return sum(self.by_function(under).values())

    def by_function(self, under=None):
        """shim()'s instructions by function, callers merged (--detail)."""
        out = collections.Counter()
        for fn in self.ir:
            chain = fn.split("'")
            if under is None or any(under.search(f) for f in chain):
                out[chain[0]] += self._counted(fn)
        return out

    def poll_empty(self):
        """Instructions of one poll that finds nothing: those executed exactly
        once per call of poll (its entry, the CQ poll, the return); the
        per-completion loop runs as often as there are completions."""
        by_addr = collections.Counter()
        for fn, costs in self.ir.items():
            if POLL.search(fn.split("'")[0]):
                by_addr.update(costs)
        return sum(1 for ir in by_addr.values() if ir == self.poll_calls)

    def poll_work(self):
        """The shim's instructions in and under poll (waits included: poll is
        called from them) minus its empty polls: the completions' handling."""
        total = sum(sum(c.values()) for fn, c in self.ir.items()
                    if any(POLL.search(f) for f in fn.split("'")))
        return total - self.poll_calls * self.poll_empty()


def measures(prof, case):
    """A case's quantity in one profile: (value, per_call). per_call False:
    already per event (not differenced)."""
    if case == "rdma-post":
        return prof.shim(POST), True
    if case == "rdma-poll-completions":
        return prof.poll_work(), True
    if case == "rdma-poll-empty":
        return prof.poll_empty(), False
    return prof.shim(), True


def run_job(args, job):
    """{case: per-call count} of one job (two launches)."""
    got = {}
    profiles = {}
    edges = block_edges(os.path.join(args.build, "shim", f"libmlxa2a-{job.family}.so"))
    for iters in (N1, N2):
        outdir = tempfile.mkdtemp(prefix="mlxa2a-budget-")
        try:
            launch(args, job, iters, outdir)
            profiles[iters] = {r: Profile(os.path.join(outdir, f"cg.{r}"), edges) for r in job.ranks}
        finally:
            shutil.rmtree(outdir, ignore_errors=True)
    for rank, cases in job.ranks.items():
        for case in cases:
            a, per_call = measures(profiles[N1][rank], case)
            b, _ = measures(profiles[N2][rank], case)
            got[case] = (b - a) / (N2 - N1) if per_call else (a if a == b else f"{a}/{b}")
        if args.detail:
            under = POST if "rdma-post" in cases else None
            fa, fb = (profiles[n][rank].by_function(under) for n in (N1, N2))
            for fn in sorted(set(fa) | set(fb), key=lambda f: fa[f] - fb[f]):
                if fb[fn] != fa[fn]:
                    print(f"    rank {rank} {(fb[fn] - fa[fn]) / (N2 - N1):9.2f}  {fn[:110]}")
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--case", action="append", help="only jobs measuring this case")
    ap.add_argument("--detail", action="store_true", help="per-call count of each function")
    args = ap.parse_args()
    unknown = set(args.case or []) - set(BUDGETS)
    if unknown:
        ap.error(f"unknown case {', '.join(sorted(unknown))} (cases: {', '.join(BUDGETS)})")
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed (scripts/setup.sh installs it)")
        return 77
    # The budgets are counts of scripts/build.sh's build: another optimisation
    # level, LTO or a sanitizer compiles other instructions.
    opts = {o["name"]: o["value"] for o in json.load(open(
        os.path.join(args.build, "meson-info", "intro-buildoptions.json")))}
    built = (opts["optimization"], opts["b_lto"], opts["b_sanitize"])
    if built != ("3", False, "none"):
        print(f"SKIP: budgets are for a release build (-O3, no LTO, no sanitizer), not {built}")
        return 77
    jobs = [j for j in JOBS if not args.case or any(c in args.case for r in j.ranks.values()
                                                      for c in r)]
    fakeverbs = os.path.join(args.build, "tests", "fakeverbs", "lib", "libibverbs.so.1")
    failed = []
    for job in jobs:
        if not shutil.which("mpirun.openmpi" if job.family == "ompi" else "mpiexec.mpich"):
            print(f"skip {job.name}: no launcher for {job.family}")
            continue
        if "FAKEVERBS_QUIET" in job.env and not os.path.exists(fakeverbs):
            print(f"skip {job.name}: fakeverbs is not built")
            continue
        runs = []
        for _ in range(args.repeat):
            t0 = time.monotonic()
            runs.append(run_job(args, job))
            print(f"{job.name}: {time.monotonic() - t0:.1f} s", flush=True)
        for case in runs[0]:
            counts = [r[case] for r in runs]
            budget, today = BUDGETS[case]
            shown = ", ".join(f"{c:.2f}" if isinstance(c, float) else str(c) for c in counts)
            worst = max(c if isinstance(c, (int, float)) else float("inf") for c in counts)
            verdict = "ok" if worst <= budget else "OVER BUDGET"
            print(f"  {case:24} {shown:30} budget {budget} (today {today}) {verdict}")
            if worst > budget:
                failed.append(case)
    if failed and not args.report:
        print(f"FAIL: over budget: {', '.join(failed)} (bench/results/budgets.md: a change "
              "that adds instructions raises no budget without saying why)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
