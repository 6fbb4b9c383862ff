#!/usr/bin/env python3
"""What fakeverbs leaves in /dev/shm when its users die by SIGKILL, and the
test harnesses' way of removing it.

fakeverbs keeps its shared files in one rendezvous directory per job
($FAKEVERBS_DIR, else /dev/shm/fakeverbs-<uid>-<job>, rendezvous.h), named
"<pid>.<kind>..." plus "qpn.*" symlinks to them. A process removes its own at
exit, and the next fakeverbs process to start in or beside that directory
sweeps dead pids' entries (sweep.h); a job killed with kill -9 in a directory
no fakeverbs process starts in or beside again leaves it behind for good.

  run_dir()      a fresh FAKEVERBS_DIR for one run, removed with everything
                 in it when the run is over, however it ended (the MPI and
                 mlx5 harnesses)
  sweep()        removes dead pids' entries from every fakeverbs-<uid>-*
                 directory of ours in /dev/shm, and the directories left
                 empty (scripts/test.sh, after the suites)

Usage: leftovers.py sweep
       leftovers.py run -- COMMAND [ARGS...]   (COMMAND with a fresh
                 FAKEVERBS_DIR, removed afterwards; exits with its status)
"""
import contextlib
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys

ROOT = "/dev/shm"


def _owner_pid(dirpath, name):
    """The pid a rendezvous entry belongs to ("<pid>.*", or a "qpn.*" link
    to such a file), 0 if none."""
    m = re.match(r"(\d+)\.", name)
    if not m and name.startswith("qpn."):
        with contextlib.suppress(OSError):
            m = re.match(r"(\d+)\.", os.path.basename(os.readlink(os.path.join(dirpath, name))))
    return int(m.group(1)) if m else 0


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")  # an unreaped zombie is dead
    except (OSError, IndexError):
        return False


def sweep(root=ROOT):
    """Removes dead processes' entries from our fakeverbs-<uid>-* directories
    (real directories owned by us, never followed through a symlink) and the
    directories that end up empty. Returns the paths removed."""
    removed = []
    head = f"fakeverbs-{os.getuid()}-"
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not d.startswith(head) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        for name in os.listdir(path):
            pid = _owner_pid(path, name)
            if pid > 0 and not _alive(pid):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(path, name))
                    removed.append(os.path.join(path, name))
        with contextlib.suppress(OSError):
            os.rmdir(path)  # fails while a live process has entries there
            removed.append(path)
    return removed


@contextlib.contextmanager
def run_dir(root=ROOT):
    """A fresh rendezvous directory name for one run (fakeverbs creates it);
    the directory and whatever is in it go when the block ends."""
    path = os.path.join(root, f"fakeverbs-{os.getuid()}-run-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main(argv):
    if argv[:1] == ["sweep"]:
        for p in sweep():
            print(f"removed {p}")
        return 0
    if argv[:2] == ["run", "--"] and len(argv) > 2:
        # meson's SIGTERM on a timeout must still remove the directory.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
        with run_dir() as d:
            return subprocess.call(argv[2:], env=dict(os.environ, FAKEVERBS_DIR=d))
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
