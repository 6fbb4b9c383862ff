"""Runs an MPI launcher for scripts/cluster (docs/hosts.md): forwards its
output, bounds the whole job (--timeout) and bounds MPICH 4.0.2's
MPI_Finalize hang over UCX tcp (--done-pattern/--done-count/
--finalize-grace). Called from `cluster launch` only; blocks until the
launcher has ended or been killed (with its process group)."""
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time


def outside_finalize(pids):
    """Those of pids whose main thread is not inside PMPI_Finalize (gdb, all
    at once: each attach costs about a second)."""
    gdbs = {p: subprocess.Popen(["gdb", "-batch", "-p", str(p), "-ex", "bt"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for p in pids}
    out = []
    for p, g in gdbs.items():
        text, _ = g.communicate(timeout=120)
        if "PMPI_Finalize" not in text and os.path.exists(f"/proc/{p}"):
            out.append(p)
    return out


def supervise(cmd, start_launcher, ranks, args):
    """Runs the launcher (start_launcher() execs it in a child whose stdout is
    the pipe we read), forwarding its output; returns its exit code.
    --timeout bounds the whole job (124). --finalize-grace bounds MPICH
    4.0.2's MPI_Finalize over UCX tcp, which can hang (a rank finished
    ucp_disconnect_nb and blocks in a PMI barrier without progressing UCX;
    MPICH PR #6596): once --done-count lines matching --done-pattern have come
    out, the job gets that many seconds to end; if it has not, and gdb shows
    every rank inside PMPI_Finalize, the job is killed and counted as ended
    (exit 0, one line on stderr); any rank elsewhere is a real hang (124)."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        os.close(r)
        os.dup2(w, 1)
        start_launcher()
    os.close(w)
    start = time.time()
    done_at = None
    seen = 0
    pattern = re.compile(args.done_pattern) if args.done_pattern else None
    buf = b""
    while True:
        now = time.time()
        if args.timeout and now - start > args.timeout:
            os.killpg(child, signal.SIGKILL)
            os.waitpid(child, 0)
            print(f"cluster: launch: timed out after {args.timeout:g} s: {shlex.join(cmd)}",
                  file=sys.stderr)
            return 124
        if done_at and now - done_at > args.finalize_grace:
            pids = ranks()
            stuck = outside_finalize(pids)
            os.killpg(child, signal.SIGKILL)
            os.waitpid(child, 0)
            if stuck:
                print(f"cluster: launch: ranks {stuck} still running {args.finalize_grace:g} s "
                      "after the job's last result line, outside MPI_Finalize", file=sys.stderr)
                return 124
            print(f"cluster: launch: {len(pids)} ranks still in MPI_Finalize "
                  f"{args.finalize_grace:g} s after the job's results: ended (MPICH 4.0.2 over "
                  "UCX tcp, MPICH PR #6596)", file=sys.stderr)
            return 0
        ready, _, _ = select.select([r], [], [], 0.2)
        if ready:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            os.write(1, chunk)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if pattern:
                seen += sum(bool(pattern.search(l.decode(errors="replace"))) for l in lines)
                if done_at is None and seen >= args.done_count:
                    done_at = time.time()
    os.close(r)
    while True:
        got, status = os.waitpid(child, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(status) & 0xff
        if args.timeout and time.time() - start > args.timeout:
            os.killpg(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return 124
        time.sleep(0.05)
