"""The site tune file end to end (issue 40 item 1, docs/tune.md "Site tuning"),
through run_mpi_test.py (which checks results, traces and /dev/shm each time):
  1. scripts/mlxa2a-tune (the build's, configured into <build>/scripts) makes
     the file on this host with this test's ranks and layout (--env passes a
     pretend layout: MLXA2A_DEBUG_NODE_SIZE); it is stamped (build, MPI,
     HCA, layout) and decides every size class it tuned;
  2. a job with MLXA2A_TUNE_SITE_DIR naming the file's directory (and no
     MLXA2A_TUNE_FILE: the default site file) runs no trial on
     MPI_COMM_WORLD for the covered classes ("tune file: X" instead);
  3. the same file with another build line, and with another layout, is
     ignored with exactly one warning; the job tunes as without it;
  4. given as MLXA2A_TUNE_FILE, a file made on something else is not
     replaced either (same inode and mtime), though the job decided classes.
With --other-layout VAR=VAL, step 3 also runs the job on a real other layout
(the test's layout without VAR) against the file as made.
Usage: run_site_tune_test.py --tune MLXA2A_TUNE --family F [--env VAR=VAL]
       [--other-layout VAR=VAL] RUN_MPI_TEST OPTIONS... --np N --prog PROG [ARGS]
"""
import os
import re
import subprocess
import sys
import tempfile

SIZES = "1:4096"  # classes 0..12; the program's sizes lie within


def run(env, runner_args, extra, drop=()):
    at = runner_args.index("--prog")
    cmd = [sys.executable] + runner_args[:at] + extra + runner_args[at + 1:]
    base = {k: v for k, v in os.environ.items() if k not in drop}
    p = subprocess.run(cmd, env={**base, **env}, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(p.stdout.strip())
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(extra)} with {env}")


def option(args, name, default=None):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i:i + 2]
        return value
    return default


def make_file(tune, family, np, layout_env, out):
    cmd = [tune, "--np", str(np), "--mpi", family, "--sizes", SIZES, "--samples", "1",
           "--iterations", "60", "--warmup", "10", "--out", out]
    for kv in layout_env:
        cmd += ["--env", kv]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLXA2A_")}
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout.strip())
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}")
    path = os.path.join(out, f"tune-{family}.txt")
    text = open(path).read()
    for key in ("build", "mpi", "hca", "layout"):
        if not re.search(rf"^made {key} \S", text, re.M):
            sys.exit(f"FAIL: the site file has no 'made {key}' line:\n{text}")
    classes = re.findall(rf"^mpi={family} ranks={np} .* bytes=(\S+) path=\w+$", text, re.M)
    if len(classes) != 13:
        sys.exit(f"FAIL: the site file decides {len(classes)} classes at ranks={np}, "
                 f"expected 13 (1 B-4 KiB):\n{text}")
    return path, text


def main():
    args = sys.argv[1:]
    tune = option(args, "--tune")
    family = option(args, "--family")
    layout_env = [option(args, "--env")] if "--env" in args else []
    other = option(args, "--other-layout")
    if not tune or not family or "--prog" not in args or "--np" not in args:
        sys.exit(__doc__)
    np = int(args[args.index("--np") + 1])
    runner_args = args
    layout = dict(kv.split("=", 1) for kv in layout_env)
    with tempfile.TemporaryDirectory(prefix="mlxa2a-site-") as tmp:
        site = os.path.join(tmp, "site")
        path, text = make_file(tune, family, np, layout_env, site)
        job = {**layout, "MLXA2A_TUNE_SITE_DIR": site, "MLXA2A_TUNE_SAMPLES": "3"}
        # 2. Covered classes take the file's decisions: no trial on world.
        run(job, runner_args,
            ["--forbid-trace", r"comm=MPI_COMM_WORLD .*reason=tuning",
             "--expect-trace", r"comm=MPI_COMM_WORLD .*reason=tune file: \w+\n", str(np)],
            drop=("MLXA2A_TUNE_FILE",))
        print("PASS: the site file's classes ran no trial")
        # 3. Made on something else: one warning, trials as without it.
        ignored = ["--expect-warning", "tune file .* ignored, made on something else",
                   "--expect-trace", r"comm=MPI_COMM_WORLD .*reason=tuning: trial", str(np),
                   "--forbid-reason", "^tune file"]
        edits = {
            "build": lambda t: re.sub(r"^made build .*$", "made build mlxa2a 0.0.9 (another)",
                                      t, flags=re.M),
            "layout": lambda t: re.sub(r"^made layout .*$",
                                       f"made layout mpi={family} ranks={np + 2} nodes=2 "
                                       f"ranks_per_node={(np + 2) // 2} oversubscribed=0",
                                       t, flags=re.M),
        }
        for what, edit in edits.items():
            other_dir = os.path.join(tmp, what)
            os.mkdir(other_dir)
            with open(os.path.join(other_dir, f"tune-{family}.txt"), "w") as f:
                f.write(edit(text))
            run({**job, "MLXA2A_TUNE_SITE_DIR": other_dir}, runner_args, ignored,
                drop=("MLXA2A_TUNE_FILE",))
            print(f"PASS: a site file of another {what} was ignored with one warning")
        if other:
            var = other.split("=", 1)[0]
            run({**{k: v for k, v in job.items() if k != var}, var: other.split("=", 1)[1]},
                runner_args, ignored, drop=("MLXA2A_TUNE_FILE",))
            print(f"PASS: the file made on {layout_env} was ignored on {other}")
        # 4. As MLXA2A_TUNE_FILE: made on something else, so never replaced.
        mine = os.path.join(tmp, "build", f"tune-{family}.txt")
        before = os.stat(mine)
        run({**job, "MLXA2A_TUNE_FILE": mine}, runner_args, ignored)
        after = os.stat(mine)
        if (after.st_ino, after.st_mtime_ns) != (before.st_ino, before.st_mtime_ns):
            sys.exit("FAIL: a tune file made on another build was replaced")
        print("PASS: MLXA2A_TUNE_FILE made on another build was left as it was")


if __name__ == "__main__":
    main()
