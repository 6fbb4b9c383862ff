"""MLXA2A_TUNE_FILE end to end, through run_mpi_test.py (which checks results,
traces and /dev/shm each time):
  1. a job with made-up timings (MLXA2A_DEBUG_TUNE_TIMES) tunes, and rank 0
     writes its decisions at MPI_Finalize;
  2. mlxa2a_info lists the file's decisions;
  3. a job with the opposite timings reads the file: its classes are decided
     by the file ("tune file: ..."), never by trials, and stay in it (classes
     the first job left undecided may be added);
  4. explicit MLXA2A_TUNE rules win over the file;
  5. where a tune file should not be written, it is not (issue 24): a job
     with unchanged decisions leaves the file as it is (same inode and mtime);
     a file that is no tune file and a character device (our own, made with
     mknod when root) are read by no one and left as they are, with a
     warning; symbolic links planted at the names the temporary used to have
     (<file>.tmp.<pid of rank 0>) are never followed.
Usage: run_tune_file_test.py --info MLXA2A_INFO RUN_MPI_TEST OPTIONS... --prog PROG [ARGS]
(OPTIONS: what run_mpi_test.py needs, e.g. --mpirun ... --np 3)
"""
import os
import re
import stat
import subprocess
import sys
import tempfile


def run(env, runner_args, extra):
    at = runner_args.index("--prog")
    cmd = [sys.executable] + runner_args[:at] + extra + runner_args[at + 1:]
    p = subprocess.run(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(p.stdout.strip())
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(extra)} with {env}")


def main():
    args = sys.argv[1:]
    if args[:1] != ["--info"] or "--prog" not in args:
        sys.exit(__doc__)
    info, runner_args = args[1], args[2:]
    with tempfile.TemporaryDirectory(prefix="mlxa2a-tunefile-") as tmp:
        path = os.path.join(tmp, "decisions.txt")
        base = {"MLXA2A_TUNE_FILE": path, "MLXA2A_TUNE_SAMPLES": "1"}
        # copy is fastest wherever it applies: every engine class decides copy.
        run({**base, "MLXA2A_DEBUG_TUNE_TIMES": "pmpi=50,line=40,copy=10,cma=40,hier=40"},
            runner_args, ["--expect-some-reason", "^tuned: copy", "--forbid-reason", "^tune file"])
        text = open(path).read() if os.path.exists(path) else ""
        decisions = re.findall(r"^mpi=\S+ ranks=\d+ .* path=(\w+)$", text, re.M)
        if not decisions or set(decisions) != {"copy"}:
            sys.exit(f"FAIL: the tune file holds {decisions}, expected copy decisions:\n{text}")
        shown = subprocess.run([info], env={**os.environ, "MLXA2A_TUNE_FILE": path},
                               stdout=subprocess.PIPE, text=True).stdout
        listed = re.findall(r"^  \S+ ranks=\d+ .*-> (\w+)$", shown, re.M)
        if len(listed) != len(decisions):
            sys.exit(f"FAIL: mlxa2a_info lists {len(listed)} decisions, the file has "
                     f"{len(decisions)}:\n{shown}")
        # Trials would now pick pmpi; the file's classes must not run any.
        flipped = {**base, "MLXA2A_DEBUG_TUNE_TIMES": "pmpi=1,line=40,copy=40,cma=40,hier=40"}
        run(flipped, runner_args, ["--expect-some-reason", "^tune file: copy$"])
        # Classes the first run left undecided may decide now (a neighbour's
        # decision from the file shortens their trials, docs/tune.md); the
        # file's own decisions stay.
        kept = open(path).read().splitlines()
        if not set(text.splitlines()) <= set(kept):
            sys.exit(f"FAIL: the second run changed the file's decisions:\n{text}\n->\n"
                     + "\n".join(kept))
        before = os.stat(path)
        # Explicit rules win over the file.
        run({**flipped, "MLXA2A_TUNE": "0-inf:auto#0-64K:pmpi"}, runner_args,
            ["--expect-some-reason", "^MLXA2A_TUNE selects pmpi", "--expect-path", "pmpi",
             "--allow-reason", "^invalid argument|^tune file: copy$|^tuned|^tuning|^auto: single"])
        after = os.stat(path)
        if (after.st_ino, after.st_mtime_ns) != (before.st_ino, before.st_mtime_ns):
            sys.exit("FAIL: a job that decided nothing new rewrote the tune file")
        print(f"PASS: {len(decisions)} decisions written, listed, read back and overridden")
        check_never_written(tmp, runner_args)


def check_never_written(tmp, runner_args):
    tuning = {"MLXA2A_TUNE_SAMPLES": "1",
              "MLXA2A_DEBUG_TUNE_TIMES": "pmpi=50,line=40,copy=10,cma=40,hier=40"}
    # Every rank warns that it ignores the file; rank 0, once, that it does
    # not write it.
    refused = ["--expect-some-reason", "^tuned: copy",
               "--allow-warning", "MLXA2A_TUNE_FILE ignored",
               "--expect-warning", "MLXA2A_TUNE_FILE not written"]
    garbage = os.path.join(tmp, "garbage.txt")
    with open(garbage, "w") as f:
        f.write("precious user data\n")
    run({**tuning, "MLXA2A_TUNE_FILE": garbage}, runner_args, refused)
    if open(garbage).read() != "precious user data\n":
        sys.exit("FAIL: a file that is no tune file was replaced")
    if os.geteuid() == 0:
        dev = os.path.join(tmp, "nulldev")  # /dev/null itself is never put at risk
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        run({**tuning, "MLXA2A_TUNE_FILE": dev}, runner_args, refused)
        st = os.lstat(dev)
        if not stat.S_ISCHR(st.st_mode) or st.st_rdev != os.makedev(1, 3):
            sys.exit("FAIL: a character device given as MLXA2A_TUNE_FILE was replaced")
        devices = "a character device and "
    else:
        print("note: not root, so no character device of our own (mknod): not checked")
        devices = ""
    # Rank 0's pid will be among the next few thousand.
    path = os.path.join(tmp, "planted.txt")
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    last = int(open("/proc/sys/kernel/ns_last_pid").read())
    top = int(open("/proc/sys/kernel/pid_max").read())
    planted = [f"{path}.tmp.{pid}" for pid in range(last + 1, min(last + 4000, top))]
    for name in planted:
        os.symlink(victim, name)
    run({**tuning, "MLXA2A_TUNE_FILE": path}, runner_args, ["--expect-some-reason", "^tuned: copy"])
    if open(victim).read() != "precious\n" or os.path.islink(path):
        sys.exit("FAIL: the tune file was written through a planted symbolic link")
    if not re.search(r"^mpi=\S+ ranks=\d+ .* path=copy$", open(path).read(), re.M):
        sys.exit("FAIL: no decisions written beside the planted symbolic links")
    if not all(os.path.islink(name) for name in planted):
        sys.exit("FAIL: a planted symbolic link was replaced")
    print(f"PASS: {devices}a file that is no tune file left as they were; "
          f"{len(planted)} planted symbolic links not followed")


if __name__ == "__main__":
    main()
