#!/usr/bin/env python3
"""Runs a2a_fuzz (tests/mpi/a2a_fuzz.cc) by hand over many seeds and switch
configurations, each job under a timeout, and logs one line per job:
    <config> <family> np=<n> seed=<s> calls=<c> PASS|FAIL|HANG|CRASH|WARN <secs>
A failing job is run again without mlxa2a: if it fails there too the MPI is
to blame (logged as MPI-FAIL). Only the runs with mlxa2a are timed out; a
job's stderr is kept under --keep DIR when it did not pass.
Usage: fuzz_campaign.py --build DIR [--family ompi,mpich] [--np 2,3,4]
         [--seeds 1:50] [--calls 300] [--max-bytes 65536] [--configs a,b]
         [--timeout 120] [--log FILE] [--keep DIR]
fuzz_campaign.py --list prints the configurations."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

FV = "tests/fakeverbs/lib/libibverbs.so.1"
RDMA = {"MLXA2A_NET_VERBS_LIBRARY": FV, "FAKEVERBS_QUIET": "1", "MLXA2A_NET_TIMEOUT": "20000"}

# name -> switches (FV is made absolute under --build).
CONFIGS = {
    "one-node": {},
    "one-node-samples1": {"MLXA2A_TUNE_SAMPLES": "1"},
    "one-node-shm": {"MLXA2A_TUNE": "shm"},
    "one-node-pmpi": {"MLXA2A_TUNE": "pmpi"},
    "one-node-smallslot": {"MLXA2A_TUNE": "shm", "MLXA2A_SHM_SLOT_SIZE": "4K",
                           "MLXA2A_SHM_SLOT_SIZE_OVERSUBSCRIBED": "4K"},
    "one-node-cma1k": {"MLXA2A_TUNE": "shm", "MLXA2A_SHM_CMA_THRESHOLD": "1K",
                       "MLXA2A_SHM_CMA_THRESHOLD_OVERSUBSCRIBED": "1K"},
    "one-node-fixed": {"MLXA2A_TUNE_SAMPLES": "0"},
    "vn1-shm": {"MLXA2A_DEBUG_NODE_SIZE": "1", "MLXA2A_TUNE": "shm"},
    "vn2-auto": {"MLXA2A_DEBUG_NODE_SIZE": "2", "MLXA2A_TUNE_SAMPLES": "1"},
    "vn2-shm": {"MLXA2A_DEBUG_NODE_SIZE": "2", "MLXA2A_TUNE": "shm"},
    "vn2-shm-smallslot": {"MLXA2A_DEBUG_NODE_SIZE": "2", "MLXA2A_TUNE": "shm",
                          "MLXA2A_SHM_SLOT_SIZE": "4K", "MLXA2A_NET_PMPI_SLOT_SIZE": "4K",
                          "MLXA2A_NET_PMPI_PIECE": "256"},
    "vn12-shm": {"MLXA2A_DEBUG_NODE_SIZE": "1,2", "MLXA2A_TUNE": "shm"},
    "vnrr2-auto": {"MLXA2A_DEBUG_NODE_SIZE": "rr:2", "MLXA2A_TUNE_SAMPLES": "1"},
    "vn3-leaders2-shm": {"MLXA2A_DEBUG_NODE_SIZE": "3", "MLXA2A_LEADERS": "2",
                         "MLXA2A_TUNE": "shm"},
    "rdma-vn2": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_SHM_SLOT_SIZE="16K"),
    "rdma-vn2-rdma": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_TUNE="rdma",
                          MLXA2A_SHM_SLOT_SIZE="16K"),
    "rdma-vn2-auto1": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_TUNE_SAMPLES="1",
                           MLXA2A_SHM_SLOT_SIZE="16K", MLXA2A_NET_ZCOPY_THRESHOLD="4K"),
    "rdma-vn12-zcopy1": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="1,2", MLXA2A_TUNE="rdma",
                             MLXA2A_NET_ZCOPY_THRESHOLD="1", MLXA2A_SHM_SLOT_SIZE="16K"),
    "rdma-vn2-zcopy1-align": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_TUNE="rdma",
                                  MLXA2A_NET_ZCOPY_THRESHOLD="1", MLXA2A_RCACHE_ALIGN="4096",
                                  MLXA2A_RCACHE_MAX_REGIONS="2", MLXA2A_SHM_SLOT_SIZE="16K"),
    "rdma-vn1-zcopy-strict": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="1", MLXA2A_TUNE="rdma",
                                  MLXA2A_NET_ZCOPY_THRESHOLD="100",
                                  MLXA2A_RCACHE_INVALIDATION="strict",
                                  MLXA2A_RCACHE_MAX_BYTES="256K", MLXA2A_SHM_SLOT_SIZE="4K"),
    # Each way the cache can learn of unmaps, alone (auto picks one of them).
    "rdma-vn2-zcopy1-ucm": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_TUNE="rdma",
                                MLXA2A_NET_ZCOPY_THRESHOLD="1", MLXA2A_RCACHE_INVALIDATION="ucm",
                                MLXA2A_SHM_SLOT_SIZE="16K"),
    "rdma-vn2-zcopy1-patch": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_TUNE="rdma",
                                  MLXA2A_NET_ZCOPY_THRESHOLD="1",
                                  MLXA2A_RCACHE_INVALIDATION="patch", MLXA2A_SHM_SLOT_SIZE="16K"),
    # Failure transparency (docs/hier.md): random failed writes (each WR
    # fails with this probability; the QP then goes to error and its
    # partner's messages through PMPI), staged and zero-copy; every call must
    # still return MPI_SUCCESS with the right bytes.
    # A retry budget of 8 x 16.8 ms (MLXA2A_NET_QP_TIMEOUT=12): fakeverbs
    # waits it out before a write fails, as an HCA does (8.6 s by default).
    "rdma-vn2-faults": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_TUNE="rdma",
                            FAKEVERBS_FAULT="fail_prob=0.002", MLXA2A_SHM_SLOT_SIZE="16K",
                            MLXA2A_NET_QP_TIMEOUT="12"),
    "rdma-vn2-zcopy1-faults": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_TUNE="rdma",
                                   MLXA2A_NET_ZCOPY_THRESHOLD="1",
                                   FAKEVERBS_FAULT="fail_prob=0.002:rem_access",
                                   MLXA2A_SHM_SLOT_SIZE="16K", MLXA2A_NET_QP_TIMEOUT="12"),
    "rdma-vn31-unpipelined": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="3,1", MLXA2A_TUNE="rdma",
                                  MLXA2A_NET_PIPELINE="n", MLXA2A_SHM_SLOT_SIZE="4K"),
    # Rule tables that send neighbouring sizes down different paths.
    "one-node-rules": {"MLXA2A_TUNE": "0-1K:shm#1K-16K:pmpi#16K-inf:auto",
                       "MLXA2A_TUNE_SAMPLES": "1"},
    "vn2-rules": {"MLXA2A_DEBUG_NODE_SIZE": "2", "MLXA2A_TUNE": "0-257:pmpi#257-4K:shm"},
    "rdma-vn2-rules": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="2", MLXA2A_SHM_SLOT_SIZE="16K",
                           MLXA2A_TUNE="0-64:rdma#64-8K:pmpi#8K-inf:auto",
                           MLXA2A_NET_ZCOPY_THRESHOLD="16K", MLXA2A_TUNE_SAMPLES="1"),
    "rdma-vn3-leaders2-pool0": dict(RDMA, MLXA2A_DEBUG_NODE_SIZE="3", MLXA2A_LEADERS="2",
                                    MLXA2A_SHM_POOL="0", MLXA2A_SHM_SLOT_SIZE="16K"),
}


def command(args, family, np, env, prog_args, shim):
    build = args.build
    pre = [os.path.join(build, "shim", f"libmlxa2a-{family}.so")] if shim else []
    if family == "mpich":
        pre.append(os.path.join(build, "tests", "mpi", "libmpich_idle_yield.so"))
    env = dict(env)
    if pre:
        env["LD_PRELOAD"] = ":".join(pre)
    prog = [os.path.join(build, "tests", "mpi", f"a2a_fuzz-{family}")] + prog_args
    if family == "ompi":
        cmd = ["mpirun.openmpi", "--oversubscribe", "--bind-to", "none"]
        for k in env:
            cmd += ["-x", k]
        return cmd + ["-np", str(np)] + prog, env
    return ["mpiexec.mpich", "-n", str(np)] + prog, env


# What an injected fault makes mlxa2a say (a failed write and its relay),
# not a warning of the run's own.
EXPECTED_UNDER_FAULTS = re.compile(r"warn: RDMA( write failed|: the queue pair to leader)")


def run(args, family, np, env, prog_args, shim):
    faults = "FAKEVERBS_FAULT" in env
    cmd, env = command(args, family, np, env, prog_args, shim)
    full = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                **env)
    start = time.time()
    try:
        p = subprocess.run(["timeout", "-s", "KILL", str(args.timeout)] + cmd, env=full,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        return "CRASH", str(e), 0.0
    secs = time.time() - start
    if p.returncode in (124, 137) and "RESULT" not in p.stdout:
        return "HANG", p.stdout + p.stderr, secs
    if "RESULT PASS" in p.stdout and p.returncode == 0:
        warned = [l for l in p.stderr.splitlines() if re.search(r"\[mlxa2a.*\] (warn|error):", l)
                  and not (faults and EXPECTED_UNDER_FAULTS.search(l))]
        return ("WARN" if warned else "PASS"), p.stdout + p.stderr, secs
    if "RESULT FAIL" in p.stdout:
        return "FAIL", p.stdout + p.stderr, secs
    return "CRASH", p.stdout + p.stderr, secs


def seeds_of(text):
    lo, _, hi = text.partition(":")
    return range(int(lo), int(hi or lo) + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--family", default="ompi,mpich")
    ap.add_argument("--np", default="2,3,4")
    ap.add_argument("--seeds", default="1:20")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--max-bytes", type=int, default=65536)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--log", default="-")
    ap.add_argument("--keep", default=tempfile.gettempdir())
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for name, env in CONFIGS.items():
            print(name, " ".join(f"{k}={v}" for k, v in env.items()))
        return 0
    args.build = os.path.abspath(args.build)
    log = sys.stdout if args.log == "-" else open(args.log, "a")
    bad = 0
    for name in args.configs.split(","):
        env = {k: (os.path.join(args.build, v) if v == FV else v) for k, v in CONFIGS[name].items()}
        for family in args.family.split(","):
            for np in map(int, args.np.split(",")):
                for seed in seeds_of(args.seeds):
                    prog = ["--seed", str(seed), "--calls", str(args.calls),
                            "--max-bytes", str(args.max_bytes)]
                    verdict, out, secs = run(args, family, np, env, prog, True)
                    if verdict == "FAIL":
                        ref, _, _ = run(args, family, np, {}, prog, False)
                        verdict = "MPI-FAIL" if ref != "PASS" else verdict
                    line = (f"{name} {family} np={np} seed={seed} calls={args.calls} "
                            f"max={args.max_bytes} {verdict} {secs:.1f}")
                    if verdict != "PASS":
                        bad += 1
                        keep = os.path.join(args.keep, f"fuzz-{name}-{family}-np{np}-s{seed}.txt")
                        with open(keep, "w") as f:
                            f.write(out)
                        line += f" {keep}"
                    print(line, file=log, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
