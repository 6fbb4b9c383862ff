"""MLXA2A_TUNE_FILE end to end, through run_mpi_test.py (which checks results,
traces and /dev/shm each time):
  1. a job with made-up timings (MLXA2A_DEBUG_TUNE_TIMES) tunes, and rank 0
     writes its decisions at MPI_Finalize;
  2. mlxa2a_info lists the file's decisions;
  3. a job with the opposite timings reads the file: its classes are decided
     by the file ("tune file: ..."), never by trials;
  4. explicit MLXA2A_TUNE rules win over the file.
Usage: run_tune_file_test.py --info MLXA2A_INFO RUN_MPI_TEST OPTIONS... --prog PROG [ARGS]
(OPTIONS: what run_mpi_test.py needs, e.g. --mpirun ... --np 3)
"""
import os
import re
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
        # Explicit rules win over the file.
        run({**flipped, "MLXA2A_TUNE": "0-inf:auto#0-64K:pmpi"}, runner_args,
            ["--expect-some-reason", "^MLXA2A_TUNE selects pmpi", "--expect-path", "pmpi",
             "--allow-reason", "^invalid argument|^tune file: copy$|^tuned|^tuning|^auto: single"])
        print(f"PASS: {len(decisions)} decisions written, listed, read back and overridden")


if __name__ == "__main__":
    main()
