#!/usr/bin/env python3
"""A fakeverbs user killed with SIGKILL leaves its rendezvous files behind;
the harnesses' cleanup steps (leftovers.py) must remove them:
  * run_dir(): the per-run FAKEVERBS_DIR goes when the run is over;
  * sweep(): a default-named directory (/dev/shm/fakeverbs-<uid>-<job>) of
    dead processes goes, while a live user's entries stay.
Usage: test_leftovers.py FAKEVERBS_LIBIBVERBS"""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import leftovers  # noqa: E402

# Opens the first device and makes a PD and a CQ (files in the rendezvous
# directory), says "ready" and waits to be killed.
USER = r"""
import ctypes, sys, time
v = ctypes.CDLL(sys.argv[1])
v.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
v.ibv_open_device.restype = ctypes.c_void_p
v.ibv_open_device.argtypes = [ctypes.c_void_p]
v.ibv_alloc_pd.restype = ctypes.c_void_p
v.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
v.ibv_create_cq.restype = ctypes.c_void_p
v.ibv_create_cq.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_int]
n = ctypes.c_int(0)
devs = v.ibv_get_device_list(ctypes.byref(n))
ctx = v.ibv_open_device(devs[0])
assert ctx and v.ibv_alloc_pd(ctx) and v.ibv_create_cq(ctx, 16, None, None, 0)
print("ready", flush=True)
time.sleep(60)
"""


def start_user(lib, env):
    p = subprocess.Popen([sys.executable, "-c", USER, lib], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, FAKEVERBS_QUIET="1", **env))
    if p.stdout.readline().strip() != "ready":
        p.kill()
        sys.exit("FAIL: the fakeverbs user did not get ready")
    return p


def kill9(p):
    p.send_signal(signal.SIGKILL)
    p.wait()


def entries(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def main():
    lib = sys.argv[1]
    with leftovers.run_dir() as d:
        kill9(start_user(lib, {"FAKEVERBS_DIR": d}))
        if not entries(d):
            sys.exit(f"FAIL: the killed user left nothing in {d}: the test proves nothing")
    if os.path.exists(d):
        sys.exit(f"FAIL: run_dir() left {d}: {entries(d)}")
    print(f"PASS: run_dir() removed {d} after its user was killed")

    job = f"kill9test-{os.getpid()}"
    default = os.path.join(leftovers.ROOT, f"fakeverbs-{os.getuid()}-{job}")
    live = start_user(lib, {"FAKEVERBS_JOB": job + "-live"})
    live_dir = default + "-live"
    try:
        kill9(start_user(lib, {"FAKEVERBS_JOB": job}))
        left = entries(default)
        if not left:
            sys.exit(f"FAIL: the killed user left nothing in {default}")
        leftovers.sweep()
        if os.path.exists(default):
            sys.exit(f"FAIL: sweep() left {default}: {entries(default)}")
        if not entries(live_dir):
            sys.exit(f"FAIL: sweep() removed a live user's entries in {live_dir}")
        print(f"PASS: sweep() removed {len(left)} entries of a killed user and {default}; "
              f"a live user's {len(entries(live_dir))} entries stay")
    finally:
        live.terminate()
        live.wait()
        leftovers.sweep()
        if os.path.exists(live_dir):
            sys.exit(f"FAIL: {live_dir} left after its user exited")


if __name__ == "__main__":
    main()
