#!/usr/bin/env python3
"""scripts/hwcheck's counter snapshot and judgement (hwcheck_fabric.sh's
snapshot script, hwcheck_counters.py judge) on a fake sysfs tree
(MLXA2A_HWCHECK_SYSFS), and its node-pair subnet report (hwcheck_fabric.py):

  * an error counter that grew fails the check, and the ECN marks that grew
    with it are named;
  * ECN/CNP growth alone is reported, the check still passes;
  * no tree at all: "no counters (no /sys/class/infiniband)", nothing judged;
  * two hosts whose RoCE GIDs share no subnet are flagged, a pair that
    shares one is not.

Usage: test_hwcheck_counters.py SOURCE_ROOT"""
import os
import subprocess
import sys
import tempfile

TOP = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
sys.path.insert(0, os.path.join(TOP, "scripts"))
import hwcheck_counters  # noqa: E402
import hwcheck_fabric  # noqa: E402

COUNTERS = {
    "mlx5_0/ports/1/hw_counters/out_of_sequence": 0,
    "mlx5_0/ports/1/hw_counters/local_ack_timeout_err": 2,
    "mlx5_0/ports/1/hw_counters/np_ecn_marked_roce_packets": 5,
    "mlx5_0/ports/1/hw_counters/rp_cnp_handled": 1,
    "mlx5_0/ports/1/counters/port_xmit_data": 100,
    "mlx5_1/ports/1/hw_counters/packet_seq_err": 0,
}
failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def write_tree(root, values):
    for rel, v in values.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as f:
            f.write(f"{v}\n")


def snapshot(root, path):
    """The snapshot script hwcheck runs on each node, here on this one."""
    script = ('fake=0; . "$0/scripts/hwcheck_fabric.sh"; sh -c "$(counter_snapshot_script)"')
    out = subprocess.run(["bash", "-c", script, TOP], capture_output=True, text=True, check=True,
                         env=dict(os.environ, MLXA2A_HWCHECK_SYSFS=root)).stdout
    with open(path, "w") as f:
        f.write(out)


def judge(tmp, before, after):
    """Runs the judgement of one check; returns (exit status, its line)."""
    with open(os.path.join(tmp, "checks.tsv"), "w") as f:
        f.write("ompi\tzcopy\tPASS\t1.0\t120/120 rdma\n")
    rc = subprocess.run([sys.executable, os.path.join(TOP, "scripts/hwcheck_counters.py"), "judge",
                         tmp, "ompi", "zcopy", before, after]).returncode
    with open(os.path.join(tmp, "checks.tsv")) as f:
        return rc, f.read().rstrip("\n").split("\t")


def counters_case(tmp):
    root = os.path.join(tmp, "sys")
    write_tree(root, COUNTERS)
    before, mid, after = (os.path.join(tmp, f"{n}.snap") for n in ("before", "mid", "after"))
    snapshot(root, before)
    expect(hwcheck_counters.describe(hwcheck_counters.read(before)).startswith("6 counters of 2 ports"),
           f"snapshot read 6 counters of 2 ports: {hwcheck_counters.describe(hwcheck_counters.read(before))}")
    write_tree(root, dict(COUNTERS, **{"mlx5_0/ports/1/hw_counters/np_ecn_marked_roce_packets": 12,
                                       "mlx5_0/ports/1/counters/port_xmit_data": 900}))
    snapshot(root, mid)
    rc, line = judge(tmp, before, mid)
    expect(rc == 0 and line[2] == "PASS" and "np_ecn_marked_roce_packets +7" in line[4]
           and "port_xmit_data" not in line[4], f"ECN growth reported, check passes: {rc} {line}")
    write_tree(root, dict(COUNTERS, **{"mlx5_0/ports/1/hw_counters/out_of_sequence": 3,
                                       "mlx5_0/ports/1/hw_counters/rp_cnp_handled": 4}))
    snapshot(root, after)
    rc, line = judge(tmp, mid, after)
    expect(rc == 1 and line[2] == "FAIL" and "error counters grew" in line[4]
           and "mlx5_0:1 out_of_sequence +3" in line[4] and "rp_cnp_handled +3" in line[4],
           f"out_of_sequence growth fails the check, CNP named: {rc} {line}")
    with open(os.path.join(tmp, "counters.tsv")) as f:
        kinds = sorted(r.split("\t")[5] for r in f.read().splitlines())
    expect(kinds == ["ecn", "ecn", "error"], f"counters.tsv classes {kinds}")


def no_sysfs_case(tmp):
    none = os.path.join(tmp, "none.snap")
    snapshot(os.path.join(tmp, "no-such-dir"), none)
    desc = hwcheck_counters.describe(hwcheck_counters.read(none))
    expect(desc == hwcheck_counters.NO_SYSFS, f"no tree: {desc!r}")
    rc, line = judge(tmp, none, none)
    expect(rc == 0 and line[2] == "PASS" and line[4] == "120/120 rdma", f"no tree, nothing judged: {line}")


def subnet_case():
    def roce(host, gid, cidr):
        return [f"{host}| dev hca_id:\tmlx5_0", f"{host}| dev \tfw_ver:\t\t22.36.1010",
                f"{host}| dev \t\tport:\t1", f"{host}| dev \t\t\tlink_layer:\t\tEthernet",
                f"{host}| dev \t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0000:0000:0000:0001, RoCE v2",
                f"{host}| dev \t\t\tGID[  1]:\t\t::ffff:{gid}, RoCE v2",
                f"{host}| ip 2: eth2    inet {gid}/{cidr} brd x scope global eth2"]
    lines = roce("a", "10.1.0.5", 16) + roce("b", "10.1.7.9", 16) + roce("c", "10.2.0.5", 24)
    ports = hwcheck_fabric.ports(lines)
    expect(ports["a"][0]["subnets"] == ["roce 10.1.0.0/16"] and ports["a"][0]["fw_ver"] == "22.36.1010",
           f"RoCE subnet from ip's prefix, firmware: {ports['a']}")
    reach = hwcheck_fabric.reachability(ports)
    cut = sorted(f"{p['a']}-{p['b']}" for p in reach["pairs"] if not p["shared"])
    expect(cut == ["a-c", "b-c"] and "2 of 3 node pairs share no subnet" in reach["note"],
           f"pairs without a shared subnet flagged: {reach['note']}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        counters_case(tmp)
    with tempfile.TemporaryDirectory() as tmp:
        no_sysfs_case(tmp)
    subnet_case()
    if failures:
        sys.exit(f"{len(failures)} failed")
    print("all passed")


if __name__ == "__main__":
    main()
