#!/usr/bin/env python3
"""fakeverbs removes dead processes' leftovers itself when a process starts
(sweep.h), in its own rendezvous directory and in the sibling fakeverbs-*
directories beside it, and never a live process's entries:

  * a job killed with SIGKILL in a sibling directory: its entries and the
    directory go;
  * a file named after a live process's pid but older than that process (a
    reused pid): it goes, the live process's own entries stay;
  * an old empty sibling fakeverbs-* directory goes; a directory not named
    fakeverbs-* is not touched;
  * the starting process says so in one line on stderr, and says nothing
    with FAKEVERBS_QUIET=1.

Everything happens in a private parent directory, so no other job's files
are looked at. Usage: test_sweep.py FAKEVERBS_LIBIBVERBS"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_leftovers import USER, entries, kill9, start_user  # noqa: E402

HOUR_AGO = time.time() - 3600


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def starter_log(lib, rendezvous, quiet):
    """Starts one fakeverbs user in `rendezvous` and stops it once ready;
    returns the lines it wrote to stderr."""
    env = dict(os.environ, FAKEVERBS_DIR=rendezvous, FAKEVERBS_QUIET="1" if quiet else "0")
    p = subprocess.Popen([sys.executable, "-c", USER, lib], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        fail(f"the starting user did not get ready: {p.communicate()[1]}")
    kill9(p)
    return [line for line in p.stderr.read().splitlines() if "removed" in line]


def fabricate(path, mtime=HOUR_AGO):
    with open(path, "wb") as f:
        f.write(b"x" * 4096)
    os.utime(path, (mtime, mtime))


def dead_pid():
    """A pid no process has (a reaped child's)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def main():
    lib = sys.argv[1]
    parent = tempfile.mkdtemp(prefix="fvsweep-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    live = None
    try:
        dead_dir, live_dir, empty_dir, other_dir, new_dir = (
            os.path.join(parent, n) for n in
            ("fakeverbs-dead", "fakeverbs-live", "fakeverbs-empty", "other", "fakeverbs-new"))
        # The live user first: its own start must not sweep the killed one.
        live = start_user(lib, {"FAKEVERBS_DIR": live_dir})
        live_entries = entries(live_dir)
        kill9(start_user(lib, {"FAKEVERBS_DIR": dead_dir}))
        if not entries(dead_dir):
            fail(f"the killed user left nothing in {dead_dir}: the test proves nothing")
        reused = os.path.join(live_dir, f"{live.pid}.cq.999")
        fabricate(reused)  # the live pid's, but older than the live process
        os.mkdir(empty_dir)
        os.utime(empty_dir, (HOUR_AGO, HOUR_AGO))
        os.mkdir(other_dir)
        foreign = os.path.join(other_dir, f"{dead_pid()}.cq.0")
        fabricate(foreign)
        os.mkdir(new_dir)
        own = os.path.join(new_dir, f"{dead_pid()}.mr")
        fabricate(own, time.time())

        logged = starter_log(lib, new_dir, quiet=False)

        checks = [
            (not os.path.exists(dead_dir), f"a killed job's directory stays: {entries(dead_dir)}"),
            (not os.path.exists(reused), f"a reused pid's old file stays: {reused}"),
            (entries(live_dir) == live_entries,
             f"a live process's entries changed: {live_entries} -> {entries(live_dir)}"),
            (not os.path.exists(empty_dir), f"an empty sibling directory stays: {empty_dir}"),
            (os.path.exists(foreign), f"a directory not named fakeverbs-* was swept: {foreign}"),
            (not os.path.exists(own), f"a dead pid's file in the starter's own directory stays: {own}"),
            (len(logged) == 1 and dead_dir in logged[0],
             f"wanted one 'removed' line on stderr naming {dead_dir}, got {logged}"),
        ]
        for ok, what in checks:
            if not ok:
                fail(what)
        print(f"PASS: the start removed a killed job's directory, a reused pid's file, an empty "
              f"sibling and a dead pid's file; a live process's {len(live_entries)} entries stay; "
              f"logged: {logged[0]}")

        kill9(start_user(lib, {"FAKEVERBS_DIR": dead_dir}))
        logged = starter_log(lib, new_dir, quiet=True)
        if os.path.exists(dead_dir) or logged:
            fail(f"quiet start: {dead_dir} left ({entries(dead_dir)}) or logged {logged}")
        print("PASS: with FAKEVERBS_QUIET=1 the start removes as much and says nothing")
    finally:
        if live:
            kill9(live)
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
