#!/usr/bin/env python3
"""Runs an MPI test program twice under mpirun -- without mlxa2a (the reference)
and with the shim preloaded -- and requires that:
  * both runs pass (RESULT PASS) and give the same ERRCLASS lines;
  * with the shim, every rank's trace (MLXA2A_COLL_TRACE=info) has exactly one
    line per MPI_Alltoall call the program made (its CALLS line), so a test that
    would also pass without the shim cannot pass here;
  * the shim logged no warning or error;
  * nothing of mlxa2a's is left in /dev/shm: no new mlxa2a-<uid>-<pid>-*
    segment whose creator process is gone.
On one host the runs get a fresh fakeverbs rendezvous directory
(FAKEVERBS_DIR, tests/fakeverbs/leftovers.py), removed afterwards however they
ended: ranks killed with SIGKILL leave none of fakeverbs' files behind.
Options for special cases:
  --expect-reason RE   every traced call must give a reason matching RE
  --expect-path PATH   every traced call must take PATH (e.g. shm) unless its
                       reason matches --allow-reason (default: invalid
                       arguments, which PMPI must report, and auto's
                       layout-dependent fall-through), and every rank must
                       have taken PATH at least once (with --expect-some-reason:
                       some rank)
  --allow-reason RE    see --expect-path
  --expect-some-reason RE  at least one traced call (any rank) has a reason
                       matching RE (e.g. that virtual nodes made a team span
                       several nodes)
  --rank0-env VAR=VAL  set VAR only for rank 0 (MPMD launch), e.g. to make an
                       all-equal switch differ across ranks
  --others-env VAR=VAL set VAR on every rank but rank 0 (MPMD launch)
  --expect-warning RE  exactly one warning line of the whole job matches RE
                       (a switch warning is printed once per job, by any rank)
  --expect-trace RE MIN  at least MIN lines of all ranks' traces match RE
                       (repeatable)
  --forbid-trace RE    no line of any rank's trace matches RE
  --plant-stale-segment  put a segment of a dead process into /dev/shm before
                       the run with mlxa2a; the run must remove it
  --allow-warning RE   mlxa2a warnings matching RE are expected (e.g. a bad
                       switch value the test sets on purpose)
  --wrong-family       the shim is built for the other MPI: the run must pass
                       with exactly one error line from mlxa2a and no trace
  --shim-env VAR=VAL   set VAR in the runs with mlxa2a only (repeatable), e.g. a
                       fault to inject and what the program should then expect
  --allow-warnings     mlxa2a may log warnings (fault tests)
  --expect-stat NAME=N the ranks' MLXA2A_COLL_STATS "stats rdma:", "zcopy:" or
                       "phases:" field NAME sums to N (NAME>=N: at least N;
                       repeatable), e.g. writes_posted, qps_created, bytes_zero_copy
  --forbid-reason RE   no traced call may give a reason matching RE
  --same-decisions     every call on MPI_COMM_WORLD took the same path on every
                       rank, tuning trials and measured decisions included
                       (the decision word of "tuned: X", "tune file: X" and
                       "tuning: trial of X", "tuning: probe of X"), and some
                       call there was tuned
Measured selection (MLXA2A_TUNE_SAMPLES) times real calls, so its decisions
vary from run to run; unless the test's environment sets MLXA2A_TUNE_SAMPLES
(usually with MLXA2A_DEBUG_TUNE_TIMES, whose made-up timings decide
deterministically), the runs use MLXA2A_TUNE_SAMPLES=0: the fixed rules. Unless
the test's environment sets MLXA2A_TUNE_SITE_DIR, it is empty: no site tune file
installed on the machine is read.
  --hosts 2,1          run on a pretend cluster (scripts/cluster, docs/hosts.md):
                       that many ranks on each pretend host, launched by the
                       MPI's own launcher through the cluster's ssh agent; the
                       traces go to a directory all hosts share, every host's
                       private /dev/shm must hold nothing of mlxa2a's after
                       the run, and without root the test is skipped (77)
  --expect-nodes N     (with --hosts; traces at debug level) the world team's
                       node map has N nodes and no team has more: the map came
                       from MPI_COMM_TYPE_SHARED, not from a virtual-node switch
  --expect-host-team   some team of >= 2 ranks lies within one host (nodes=1)
  --idle-yield LIB     MPICH only: preload LIB (tests/mpi/mpich_idle_yield.c) in
                       every run, after the shim and tools, so that ranks
                       waiting in MPICH yield the CPU (2-core CI, many ranks)
Other PMPI tools (README "With other PMPI tools"):
  --preload-before LIB LD_PRELOAD="LIB shim": LIB's MPI_* come first (LIB is
                       preloaded alone in the reference run)
  --preload-after LIB  LD_PRELOAD="shim LIB": mlxa2a hands calls on to LIB
  --expect-profile     LIB is tests/mpi/pmpi_profiler: in both runs every
                       rank's report ($PROF_REPORT.<rank>) counts one MPI_Init
                       or MPI_Init_thread, one MPI_Finalize, as many
                       MPI_Alltoall[_c] calls as the program made, and (with
                       mlxa2a) as many MPI_Comm_split calls as mlxa2a traced
Usage: run_mpi_test.py --mpirun PATH --family ompi|mpich --shim LIB --np N PROG [ARGS...]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import signal
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "fakeverbs"))
import leftovers  # noqa: E402

TIMEOUT = int(os.environ.get("MLXA2A_TEST_TIMEOUT", "300"))
CLUSTER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "scripts",
                       "cluster")


class Cluster:
    """A pretend cluster for one test (scripts/cluster), removed on exit; its
    holders also remove it if this process dies without cleaning up."""

    def __init__(self, ranks, expose):
        self.ranks = ranks
        check = subprocess.run([CLUSTER, "check"], stderr=subprocess.PIPE, text=True)
        if check.returncode != 0:
            print(check.stderr.strip())
            sys.exit(77)
        # Every host has its own /tmp: a build tree there must be exposed.
        up = subprocess.run([CLUSTER, "up", "--hosts", str(len(ranks)), "--watch",
                             str(os.getpid())] + [a for p in expose for a in ("--expose", p)],
                            stdout=subprocess.PIPE, text=True)
        if up.returncode != 0:
            sys.exit("FAIL: could not make the pretend cluster")
        self.state = up.stdout.strip()
        self.shared = os.path.join(self.state, "shared")

    def close(self):
        subprocess.run([CLUSTER, "down", self.state])

    def command(self, args, extra_env, prog):
        cmd = [CLUSTER, "launch", "--state", self.state, "--family", args.family,
               "--mpirun", args.mpirun, "--ranks",
               ",".join(map(str, self.ranks)), "--timeout", str(TIMEOUT)]
        if args.family == "mpich":
            # MPICH 4.0.2 over UCX tcp can hang in MPI_Finalize (scripts/
            # cluster_supervise.py): bounded once every rank's CALLS and rank 0's RESULT
            # line are out, and only if gdb finds every rank in PMPI_Finalize.
            cmd += ["--done-pattern", r"^(CALLS \d+ \d+|RESULT \w+)$",
                    "--done-count", str(sum(self.ranks) + 1), "--finalize-grace", "5"]
        # Remote hosts start from a clean environment (as over ssh): the
        # test's MLXA2A_* switches and the test programs' A2A_* settings travel
        # explicitly (mpirun -x / -genv).
        forwarded = {k: v for k, v in os.environ.items() if k.startswith(("MLXA2A_", "A2A_"))}
        for k, v in dict(forwarded, **extra_env).items():
            cmd += ["--env", f"{k}={v}"]
        return cmd + ["--"] + prog

    def shm_leftovers(self):
        """Everything named mlxa2a-* in any host's /dev/shm (each host is
        private to this test, so nothing there may outlive the job)."""
        left = set()
        for i in range(len(self.ranks)):
            p = subprocess.run([CLUSTER, "exec", "--state", self.state, f"h{i}", "ls", "-A",
                                "/dev/shm"], stdout=subprocess.PIPE, text=True, check=True)
            left |= {f"h{i}:/dev/shm/{n}" for n in p.stdout.split() if n.startswith("mlxa2a-")}
        return left


def launch(args, extra_env, prog):
    preloaded = "LD_PRELOAD" in extra_env  # with mlxa2a, or a PMPI tool alone
    if args.idle_yield:
        extra_env = dict(extra_env, LD_PRELOAD=":".join(
            p for p in (extra_env.get("LD_PRELOAD"), args.idle_yield) if p))
    env = dict(os.environ)
    env.update(extra_env)
    if args.cluster:
        cmd = args.cluster.command(args, extra_env, prog)
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        for line in p.stderr.splitlines():
            if line.startswith("cluster:"):
                print(line)  # e.g. a bounded MPICH finalize hang: visible in the log
        if p.returncode == 124:
            sys.exit(f"FAIL: {p.stderr.strip()}")
        return p
    cmd = [args.mpirun]
    if args.family == "ompi":
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        cmd += ["--oversubscribe", "--bind-to", "none"]
        for k in extra_env:
            cmd += ["-x", k]
    if args.others_env and preloaded:
        cmd += ["-np", "1"] + prog
        if args.np > 1:
            cmd += [":", "-np", str(args.np - 1), "env", args.others_env] + prog
    elif args.rank0_env and preloaded:
        # MPMD: rank 0 gets the extra variable through env(1), the rest do not.
        cmd += ["-np", "1", "env", args.rank0_env] + prog
        if args.np > 1:
            cmd += [":", "-np", str(args.np - 1)] + prog
    else:
        cmd += ["-np", str(args.np)] + prog
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAIL: timed out after {TIMEOUT}s: {' '.join(cmd)}")
    return p


SHM_NAME = re.compile(r"^mlxa2a-%d-(\d+)-" % os.getuid())


def shm_leftovers(args):
    """mlxa2a segments of our uid whose creator pid is dead (live ones may
    belong to concurrent jobs). Segments planted by a concurrent test
    (--plant-stale-segment: named *-planted after a dead pid) are that
    test's to judge, not leftovers of this one."""
    if args.cluster:
        return args.cluster.shm_leftovers()
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return set()
    dead = set()
    for n in names:
        m = SHM_NAME.match(n)
        if m and not n.endswith("-planted") and not os.path.exists(f"/proc/{m.group(1)}"):
            dead.add(n)
    return dead


def parse(out):
    calls = {int(r): int(n) for r, n in re.findall(r"^CALLS (\d+) (\d+)$", out, re.M)}
    errs = sorted(re.findall(r"^ERRCLASS .*$", out, re.M))
    return calls, errs, "RESULT PASS" in out


def stats_of(text):
    """Path counts from a MLXA2A_COLL_STATS line, or None."""
    m = re.search(r"\] coll: stats .*: pmpi=(\d+) shm=(\d+)$", text, re.M)
    if not m:
        return None
    r = re.search(r"\] coll: stats rdma: calls=(\d+)", text, re.M)
    return {"pmpi": int(m.group(1)), "shm": int(m.group(2)), "rdma": int(r.group(1)) if r else 0}


def rdma_stat(text, name):
    """A field of the "stats rdma:", "zcopy:" or "phases:" line, 0 when absent."""
    m = re.search(r"\] coll: stats (?:rdma|zcopy|phases): .*\b" + re.escape(name) + r"=(\d+)", text,
                  re.M)
    return int(m.group(1)) if m else 0


def stat_rule(kv):
    """NAME=N or NAME>=N (an --expect-stat) as (name, op, n)."""
    m = re.fullmatch(r"(\w+)(>=|=)(\d+)", kv)
    if not m:
        sys.exit(f"bad --expect-stat {kv!r}")
    return m.group(1), m.group(2), int(m.group(3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--family", required=True, choices=["ompi", "mpich"])
    ap.add_argument("--shim", required=True)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--expect-reason")
    ap.add_argument("--expect-path")
    # Invalid arguments go to PMPI so that it reports them; "PMPI is faster" is
    # the layout-dependent auto rule (e.g. Open MPI oversubscribed, >= 512 KiB).
    ap.add_argument("--allow-reason", default=r"^invalid argument|^auto: PMPI is faster")
    ap.add_argument("--expect-some-reason")
    ap.add_argument("--rank0-env")
    ap.add_argument("--allow-warning")
    ap.add_argument("--others-env")
    ap.add_argument("--expect-warning")
    ap.add_argument("--plant-stale-segment", action="store_true")
    ap.add_argument("--expect-trace", nargs=2, metavar=("RE", "MIN"), action="append",
                    default=[])
    ap.add_argument("--forbid-trace")
    # Seconds each mpirun may take (default MLXA2A_TEST_TIMEOUT or 300); a
    # hang then fails the test instead of blocking the suite.
    ap.add_argument("--timeout", type=int)
    ap.add_argument("--wrong-family", action="store_true")
    # Runs the program once more with the shim but without the trace
    # (MLXA2A_COLL_STATS only) and requires every rank to have sent exactly as
    # many calls to each path as the traced run did: tracing must not change
    # any decision. Single-threaded programs only (the counts are per thread).
    ap.add_argument("--untraced-check", action="store_true")
    ap.add_argument("--shim-env", action="append", default=[])
    ap.add_argument("--allow-warnings", action="store_true")
    ap.add_argument("--expect-stat", action="append", default=[])
    ap.add_argument("--forbid-reason")
    ap.add_argument("--same-decisions", action="store_true")
    ap.add_argument("--hosts")
    ap.add_argument("--expect-nodes", type=int)
    ap.add_argument("--expect-host-team", action="store_true")
    ap.add_argument("--preload-before")
    ap.add_argument("--preload-after")
    ap.add_argument("--expect-profile", action="store_true")
    ap.add_argument("--idle-yield")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.timeout:
        global TIMEOUT
        TIMEOUT = args.timeout
    args.cluster = None
    if args.hosts:
        ranks = [int(r) for r in args.hosts.split(",")]
        if sum(ranks) != args.np or args.rank0_env or args.wrong_family:
            sys.exit("run_mpi_test: --hosts must add up to --np; no --rank0-env/--wrong-family")
        if "MLXA2A_DEBUG_NODE_SIZE" in os.environ:
            sys.exit("FAIL: MLXA2A_DEBUG_NODE_SIZE is set: on pretend hosts the node map "
                     "must come from MPI")
        # meson's SIGTERM on a timeout must still remove the cluster.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: terminated"))
        args.cluster = Cluster(ranks, [args.shim, args.prog[0]] +
                               ([args.idle_yield] if args.idle_yield else []))
        try:
            check(args)
        finally:
            args.cluster.close()
    else:
        # meson's SIGTERM on a timeout must still remove the rendezvous directory.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: terminated"))
        with leftovers.run_dir() as fakeverbs_dir:
            os.environ["FAKEVERBS_DIR"] = fakeverbs_dir
            check(args)


def team_lines(text):
    return [(int(np), int(nodes)) for np, nodes in
            re.findall(r"\] coll: team id=\d+ np=(\d+) nodes=(\d+) ", text)]


def check_nodes(args, rank, text):
    teams = team_lines(text)
    world = [nodes for np, nodes in teams if np == args.np]
    if args.expect_nodes is not None:
        if not world or any(n != args.expect_nodes for n in world):
            sys.exit(f"FAIL: rank {rank}: world teams have nodes={world}, expected "
                     f"{args.expect_nodes} (from MPI_COMM_TYPE_SHARED)")
        over = [t for t in teams if t[1] > args.expect_nodes]
        if over:
            sys.exit(f"FAIL: rank {rank}: teams (np, nodes) {over} span more nodes than hosts")
    return any(np >= 2 and nodes == 1 for np, nodes in teams)


def tool_env(args, prof_dir, run):
    """LD_PRELOAD for a run of the tool alone (shim None) and PROF_REPORT."""
    env = {}
    if args.preload_before or args.preload_after:
        env["LD_PRELOAD"] = args.preload_before or args.preload_after
    if args.expect_profile:
        env["PROF_REPORT"] = os.path.join(prof_dir, run)
    return env


def preload(args):
    """The shim's LD_PRELOAD, with the other tool before or after it."""
    return ":".join(p for p in (args.preload_before, args.shim, args.preload_after) if p)


def check_profile(prof_dir, run, calls, splits=None):
    """The profiler's reports of one run (see --expect-profile)."""
    for rank, n in sorted(calls.items()):
        path = os.path.join(prof_dir, f"{run}.{rank}")
        if not os.path.exists(path):
            sys.exit(f"FAIL: {run} run: rank {rank} wrote no profiler report (its MPI_Finalize "
                     f"did not run)")
        got = {k: int(v) for k, v in re.findall(r"^(\S+) (\d+)$", open(path).read(), re.M)}
        want = {"init": 1, "MPI_Finalize": 1, "alltoall": n}
        have = {"init": got.get("MPI_Init", 0) + got.get("MPI_Init_thread", 0),
                "MPI_Finalize": got.get("MPI_Finalize", 0),
                "alltoall": got.get("MPI_Alltoall", 0) + got.get("MPI_Alltoall_c", 0)}
        if splits is not None:
            want["MPI_Comm_split"] = splits[rank]
            have["MPI_Comm_split"] = got.get("MPI_Comm_split", 0)
        if have != want:
            sys.exit(f"FAIL: {run} run: rank {rank}: the profiler counted {have}, expected {want}")
    return sum(calls.values())


def check(args):
    with tempfile.TemporaryDirectory(prefix="mlxa2a-prof-") as prof_dir:
        check_runs(args, prof_dir)


def check_runs(args, prof_dir):
    ref = launch(args, tool_env(args, prof_dir, "ref"), args.prog)
    ref_calls, ref_errs, ref_ok = parse(ref.stdout)
    if ref.returncode != 0 or not ref_ok:
        print(ref.stdout, ref.stderr)
        sys.exit("FAIL: the reference run (no mlxa2a) failed")
    if args.expect_profile:
        check_profile(prof_dir, "ref", ref_calls)

    shm_before = shm_leftovers(args)
    planted = None
    if args.plant_stale_segment:
        dead = subprocess.Popen(["true"])
        dead.wait()
        planted = f"/dev/shm/mlxa2a-{os.getuid()}-{dead.pid}-0-planted"
        with open(planted, "wb") as f:
            f.write(b"\0" * 4096)
    warned = []
    trace_hits = [0] * len(args.expect_trace)
    some_reason = some_path = False
    traced_paths = {}
    world_paths = {}
    shim_env = dict(kv.split("=", 1) for kv in args.shim_env)
    fixed_rules = ({} if "MLXA2A_TUNE_SAMPLES" in os.environ or "MLXA2A_TUNE_SAMPLES" in shim_env
                   else {"MLXA2A_TUNE_SAMPLES": "0"})
    # A site tune file installed on this machine (mlxa2a-tune) must not change
    # what a test sees: none unless the test names its directory.
    if "MLXA2A_TUNE_SITE_DIR" not in os.environ and "MLXA2A_TUNE_SITE_DIR" not in shim_env:
        fixed_rules["MLXA2A_TUNE_SITE_DIR"] = ""
    host_team = False
    splits = {}
    with tempfile.TemporaryDirectory(prefix="mlxa2a-mpitest-",
                                     dir=args.cluster.shared if args.cluster else None) as tmp:
        env = {**tool_env(args, prof_dir, "shim"), "LD_PRELOAD": preload(args),
               "MLXA2A_COLL_TRACE": "debug" if args.cluster else "info",
               "MLXA2A_LOG_FILE": os.path.join(tmp, "trace.%r"), **fixed_rules}
        env.update(shim_env)
        if args.untraced_check or args.expect_stat:
            env["MLXA2A_COLL_STATS"] = "1"
        stat_sums = {stat_rule(kv)[0]: 0 for kv in args.expect_stat}
        run = launch(args, env, args.prog)
        calls, errs, ok = parse(run.stdout)
        if run.returncode != 0 or not ok:
            print(run.stdout, run.stderr)
            sys.exit("FAIL: the run with mlxa2a failed")
        if args.wrong_family:
            complaints = [l for l in run.stderr.splitlines() if "[mlxa2a" in l]
            if len(complaints) != 1 or "built for" not in complaints[0]:
                sys.exit("FAIL: expected one error line from mlxa2a, got:\n" + run.stderr)
            if glob.glob(os.path.join(tmp, "trace.*")):
                sys.exit("FAIL: a shim of the wrong family traced calls")
            print(f"PASS: {args.family} program with the other family's shim ran unharmed: "
                  f"{complaints[0]}")
            return
        if errs != ref_errs:
            sys.exit(f"FAIL: error classes differ\n without: {ref_errs}\n with:    {errs}")
        if calls != ref_calls or len(calls) != args.np:
            sys.exit(f"FAIL: call counts differ or are missing: {ref_calls} vs {calls}")
        for rank, n in sorted(calls.items()):
            path = os.path.join(tmp, f"trace.{rank}")
            text = open(path).read() if os.path.exists(path) else ""
            # PMPI_Alltoall: the call came through another PMPI tool.
            traced = len(re.findall(
                r"\] coll: (P?MPI_Alltoall(?:_c)?|mpi_alltoall\w*|MPI_ALLTOALL)\b", text))
            splits[rank] = len(re.findall(r"\] coll: MPI_Comm_split ", text))
            if traced != n:
                print(text)
                sys.exit(f"FAIL: rank {rank} made {n} MPI_Alltoall calls, {traced} traced")
            host_team |= check_nodes(args, rank, text)
            if args.expect_reason:
                reasons = re.findall(r"\] coll: \S+ .* reason=(.*)$", text, re.M)
                wrong = [r for r in reasons if not re.search(args.expect_reason, r)]
                if wrong or not reasons:
                    sys.exit(f"FAIL: rank {rank}: reasons {sorted(set(wrong))} do not match "
                             f"{args.expect_reason!r}")
            lines = re.findall(r"\] coll: \S+ .* path=(\S+) reason=(.*)$", text, re.M)
            if args.expect_path:
                wrong = [f"path={p} reason={r}" for p, r in lines
                         if p != args.expect_path and not re.search(args.allow_reason, r)]
                took = any(p == args.expect_path for p, _ in lines)
                some_path |= took
                if wrong or not (took or args.expect_some_reason):
                    sys.exit(f"FAIL: rank {rank}: expected path={args.expect_path}; "
                             f"other paths: {sorted(set(wrong))[:5]}")
            if args.expect_some_reason:
                some_reason |= any(re.search(args.expect_some_reason, r) for _, r in lines)
            if args.forbid_reason:
                banned = sorted({r for _, r in lines if re.search(args.forbid_reason, r)})
                if banned:
                    sys.exit(f"FAIL: rank {rank}: forbidden reasons {banned[:3]}")
            if args.same_decisions:
                world = re.findall(r"\] coll: \S+ comm=MPI_COMM_WORLD id=\d+ call=(\d+) .* "
                                   r"path=(\S+) reason=(.*)$", text, re.M)
                word = re.compile(r"^(?:tuned|tune file|tuning: (?:trial|probe) of):? (\w+)")
                world_paths[rank] = {int(c): (m.group(1) if (m := word.match(r)) else p)
                                     for c, p, r in world}
                if not any(r.startswith("tuned: ") for _, _, r in world):
                    sys.exit(f"FAIL: rank {rank}: no call on MPI_COMM_WORLD was tuned")
            if args.untraced_check:
                traced_paths[rank] = {"pmpi": sum(p == "pmpi" for p, _ in lines),
                                      "shm": sum(p == "shm" for p, _ in lines),
                                      "rdma": sum(p == "rdma" for p, _ in lines)}
                if stats_of(text) != traced_paths[rank]:
                    sys.exit(f"FAIL: rank {rank}: MLXA2A_COLL_STATS {stats_of(text)} disagrees "
                             f"with its own trace {traced_paths[rank]}")
            for name in stat_sums:
                stat_sums[name] += rdma_stat(text, name)
            for i, (pattern, _) in enumerate(args.expect_trace):
                trace_hits[i] += len(re.findall(pattern, text))
            if args.forbid_trace:
                banned = re.findall(r"^.*(?:%s).*$" % args.forbid_trace, text, re.M)
                if banned:
                    sys.exit(f"FAIL: rank {rank}: forbidden trace lines {banned[:3]}")
            if args.expect_warning:
                warned += [l for l in text.splitlines()
                           if "] warn:" in l and re.search(args.expect_warning, l)]
            bad = [l for l in text.splitlines() if ("] warn:" in l or "] error:" in l)
                   and not (args.allow_warning and re.search(args.allow_warning, l))
                   and not (args.expect_warning and re.search(args.expect_warning, l))]
            if bad and not args.rank0_env and not args.allow_warnings:
                sys.exit("FAIL: mlxa2a complained:\n" + "\n".join(bad))
        if args.expect_profile:
            check_profile(prof_dir, "shim", calls, splits)
        stray = sorted(glob.glob(os.path.join(tmp, "trace.x")))
        if stray:
            sys.exit("FAIL: lines were logged before the rank was known")
        for kv in args.expect_stat:
            name, op, want = stat_rule(kv)
            if not (stat_sums[name] >= want if op == ">=" else stat_sums[name] == want):
                sys.exit(f"FAIL: MLXA2A_COLL_STATS {name} sums to {stat_sums[name]} over the "
                         f"ranks, expected {op}{want}")
        if args.untraced_check:
            env = {**tool_env(args, prof_dir, "quiet"), "LD_PRELOAD": preload(args),
                   "MLXA2A_COLL_STATS": "1",
                   "MLXA2A_LOG_FILE": os.path.join(tmp, "stats.%r"), **fixed_rules}
            env.update(shim_env)
            quiet = launch(args, env, args.prog)
            q_calls, q_errs, q_ok = parse(quiet.stdout)
            if quiet.returncode != 0 or not q_ok or q_calls != calls or q_errs != errs:
                print(quiet.stdout, quiet.stderr)
                sys.exit("FAIL: the untraced run with mlxa2a failed or differs")
            if args.expect_profile:
                check_profile(prof_dir, "quiet", calls)
            for rank in sorted(calls):
                path = os.path.join(tmp, f"stats.{rank}")
                got = stats_of(open(path).read() if os.path.exists(path) else "")
                if got != traced_paths[rank]:
                    sys.exit(f"FAIL: rank {rank}: untraced run took paths {got}, "
                             f"the traced run {traced_paths[rank]}")
    if args.same_decisions:
        first = world_paths[min(world_paths)]
        for rank, paths in sorted(world_paths.items()):
            diff = sorted(c for c in set(first) | set(paths) if first.get(c) != paths.get(c))
            if diff:
                sys.exit(f"FAIL: rank {rank} took other paths than rank {min(world_paths)} on "
                         f"MPI_COMM_WORLD at calls {diff[:5]}: {[paths.get(c) for c in diff[:5]]} "
                         f"vs {[first.get(c) for c in diff[:5]]}")
    if planted and os.path.exists(planted):
        os.unlink(planted)
        sys.exit(f"FAIL: the stale segment {planted} of a dead process was not removed")
    for hits, (pattern, least) in zip(trace_hits, args.expect_trace):
        if hits < int(least):
            sys.exit(f"FAIL: {hits} trace lines match {pattern!r}, expected at least {least}")
    if args.expect_warning and len(warned) != 1:
        sys.exit(f"FAIL: expected one warning matching {args.expect_warning!r} in the job, got "
                 f"{len(warned)}:\n" + "\n".join(warned))
    if args.expect_some_reason and not some_reason:
        sys.exit(f"FAIL: no traced call gave a reason matching {args.expect_some_reason!r}")
    if args.expect_host_team and not host_team:
        sys.exit("FAIL: no team of two or more ranks within one host")
    if args.expect_path and not some_path:
        sys.exit(f"FAIL: no rank took path={args.expect_path}")
    left = sorted(shm_leftovers(args) - shm_before)
    if left:
        sys.exit(f"FAIL: left in /dev/shm after MPI_Finalize: {left}")
    total = sum(calls.values())
    print(f"PASS: {args.family} np={args.np}" + (f" on hosts {args.hosts}" if args.hosts else "") +
          f" {os.path.basename(args.prog[0])}: "
          f"{total} calls traced, error classes {len(errs)} equal"
          + (f", path={args.expect_path} checked" if args.expect_path else ""))


if __name__ == "__main__":
    main()
