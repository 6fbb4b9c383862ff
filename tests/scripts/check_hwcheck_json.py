#!/usr/bin/env python3
"""Validates scripts/hwcheck's JSON report against docs/hwcheck.md's schema
("mlxa2a-hwcheck/4"): exactly the documented keys and types, a verdict that
follows the checks (FAIL iff one failed), and on demand what a run must show.

  check_hwcheck_json.py REPORT [--verdict PASS|FAIL] [--expect-checks LIST]
                        [--expect-fail CHECK] [--expect-leaders]
                        [--expect-leaders-on HOST,HOST...]

--expect-checks: every named check is present for every family (devices once);
--expect-fail CHECK: that check failed; --expect-leaders: every family that
ran rdma-counts has leaders with a device in the per-node report, each
reporting its RC queue pairs per partner;
--expect-leaders-on: and the named hosts each have a node entry with ports
and leaders."""
import argparse
import json
import re
import sys

TOP = {"schema", "verdict", "started", "seconds", "mode", "mlxa2a", "launcher", "families",
       "node_count", "ranks_per_node", "load_average", "nodes", "checks", "osu", "counters",
       "reachability"}
NODE = {"host", "ports", "leaders", "system", "fabric_ports"}
SYSTEM = {"ulimit_l", "kernel", "rdma_core", "fork_env", "sysfs"}
FABRIC_PORT = {"hca", "port", "fw_ver", "link_layer", "gids", "subnets"}
REACH = {"hosts_visible", "note", "pairs"}
GROWN = {"host", "port", "name", "kind", "delta"}
PORT = {"hca", "port", "state", "mtu", "link_layer"}
LEADER = {"family", "rank", "host", "hca", "hca_by", "link", "tc", "sl", "pkey",
          "qps_created", "qps_live", "mrs_live", "qps_per_pair", "inline", "relaxed_ordering",
          "hugepages"}
CHECK = {"family", "name", "verdict", "seconds", "detail", "counters"}
OSU = {"family", "bytes_per_peer", "pmpi_us", "mlxa2a_us", "ratio"}
CHECK_NAMES = {"devices", "rdma-counts", "a2a-check", "sizes", "leaders", "zcopy", "fork",
               "threads", "split-churn", "skew", "fault", "osu"}
FAMILIES = {"ompi", "mpich"}

errors = []


def check(cond, what):
    if not cond:
        errors.append(what)
    return cond


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def keys(obj, want, where, exact=True):
    ok = isinstance(obj, dict) and (set(obj) == want if exact else want <= set(obj))
    check(ok, f"{where}: keys {sorted(obj) if isinstance(obj, dict) else obj!r} vs {sorted(want)}")
    return ok


def validate_facts(n, where):
    """A node's system facts (strings) and fabric ports."""
    if keys(n["system"], SYSTEM, f"{where}.system", exact=False):
        check(all(isinstance(v, str) for v in n["system"].values()), f"{where}.system: not strings")
    for j, p in enumerate(n["fabric_ports"]):
        if keys(p, FABRIC_PORT, f"{where}.fabric_ports[{j}]"):
            check(is_int(p["port"]) and is_int(p["gids"]) and isinstance(p["subnets"], list)
                  and all(isinstance(x, str) for x in p["subnets"]), f"{where}.fabric_ports[{j}]")


def validate_reach(r):
    if keys(r, REACH, "reachability"):
        check(is_int(r["hosts_visible"]) and isinstance(r["note"], str) and r["note"],
              "reachability: hosts_visible/note")
        for j, p in enumerate(r["pairs"]):
            keys(p, {"a", "b", "shared"}, f"reachability.pairs[{j}]")


def validate(rep):
    if not keys(rep, TOP, "top level"):
        return
    check(rep["schema"] == "mlxa2a-hwcheck/4", f"schema {rep['schema']!r}")
    check(rep["verdict"] in ("PASS", "FAIL"), f"verdict {rep['verdict']!r}")
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rep["started"]), "started: not UTC ISO 8601")
    check(is_num(rep["seconds"]) and rep["seconds"] >= 0, "seconds")
    check(rep["mode"] in ("cluster", "fake"), f"mode {rep['mode']!r}")
    for k in ("mlxa2a", "launcher", "load_average", "counters"):
        check(isinstance(rep[k], str), f"{k}: not a string")
    check(rep["mlxa2a"].startswith("mlxa2a "), "mlxa2a: not the shim's build line")
    check(isinstance(rep["families"], list) and set(rep["families"]) <= FAMILIES
          and rep["families"], f"families {rep['families']!r}")
    check(is_int(rep["node_count"]) and rep["node_count"] >= 2, "node_count")
    check(is_int(rep["ranks_per_node"]) and rep["ranks_per_node"] >= 1, "ranks_per_node")
    hosts = [n.get("host") for n in rep["nodes"] if isinstance(n, dict)]
    check(hosts == sorted(set(hosts)), "nodes not sorted by host or repeated")
    for i, n in enumerate(rep["nodes"]):
        if not keys(n, NODE, f"nodes[{i}]"):
            continue
        for j, p in enumerate(n["ports"]):
            if keys(p, PORT, f"nodes[{i}].ports[{j}]"):
                check(is_int(p["port"]) and is_int(p["mtu"]), f"nodes[{i}].ports[{j}]: port/mtu")
        validate_facts(n, f"nodes[{i}]")
        for j, ld in enumerate(n["leaders"]):
            where = f"nodes[{i}].leaders[{j}]"
            if not keys(ld, LEADER, where, exact=False):
                continue
            check(ld["host"] == n["host"], f"{where}: host {ld['host']!r} under {n['host']!r}")
            check(ld["family"] in rep["families"], f"{where}: family")
            for k in ("rank", "qps_created", "qps_live", "mrs_live"):
                check(is_int(ld[k]) and ld[k] >= 0, f"{where}: {k}")
            check(is_int(ld["inline"]) and ld["inline"] >= -1, f"{where}: inline")
            check(is_int(ld["qps_per_pair"]) and ld["qps_per_pair"] >= -1 and
                  ld["qps_per_pair"] != 0, f"{where}: qps_per_pair")
            check(ld["relaxed_ordering"] in ("on", "refused", "off", "-"),
                  f"{where}: relaxed_ordering {ld['relaxed_ordering']!r}")
            check(ld["hugepages"] in ("hugetlb", "thp", "4k", "-"),
                  f"{where}: hugepages {ld['hugepages']!r}")
            for k in set(ld) - {"rank", "qps_created", "qps_live", "mrs_live", "inline",
                                "qps_per_pair"}:
                check(isinstance(ld[k], str), f"{where}: {k} not a string")
            check(ld["link"] in ("ib", "roce"), f"{where}: link {ld['link']!r}")
    for i, c in enumerate(rep["checks"]):
        if not keys(c, CHECK, f"checks[{i}]"):
            continue
        check(c["name"] in CHECK_NAMES, f"checks[{i}]: name {c['name']!r}")
        check(c["family"] in rep["families"] or (c["family"] == "all" and c["name"] == "devices"),
              f"checks[{i}]: family {c['family']!r}")
        check(c["verdict"] in ("PASS", "FAIL", "SKIP"), f"checks[{i}]: verdict {c['verdict']!r}")
        check(is_num(c["seconds"]) and c["seconds"] >= 0, f"checks[{i}]: seconds")
        check(isinstance(c["detail"], str) and c["detail"], f"checks[{i}]: detail")
        for j, g in enumerate(c["counters"]):
            if keys(g, GROWN, f"checks[{i}].counters[{j}]"):
                check(g["kind"] in ("error", "ecn", "pfc") and is_int(g["delta"]) and g["delta"] > 0,
                      f"checks[{i}].counters[{j}]: {g!r}")
    validate_reach(rep["reachability"])
    failed = [c for c in rep["checks"] if isinstance(c, dict) and c.get("verdict") == "FAIL"]
    check(rep["verdict"] == ("FAIL" if failed or not rep["checks"] else "PASS"),
          f"verdict {rep['verdict']} with {len(failed)} failed checks")
    for i, o in enumerate(rep["osu"]):
        if keys(o, OSU, f"osu[{i}]"):
            check(o["family"] in rep["families"] and is_int(o["bytes_per_peer"]) and
                  all(is_num(o[k]) and o[k] >= 0 for k in ("pmpi_us", "mlxa2a_us", "ratio")),
                  f"osu[{i}]: values {o!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--verdict", choices=("PASS", "FAIL"))
    ap.add_argument("--expect-checks", default="")
    ap.add_argument("--expect-fail", default="")
    ap.add_argument("--expect-leaders", action="store_true")
    ap.add_argument("--expect-leaders-on", default="")
    args = ap.parse_args()
    with open(args.report) as f:
        rep = json.load(f)
    validate(rep)
    if not errors:
        if args.verdict:
            check(rep["verdict"] == args.verdict, f"verdict {rep['verdict']} != {args.verdict}")
        ran = {(c["family"], c["name"]): c for c in rep["checks"]}
        for name in filter(None, args.expect_checks.split(",")):
            fams = ["all"] if name == "devices" else rep["families"]
            for fam in fams:
                check((fam, name) in ran, f"check {name} missing for {fam}")
        if args.expect_fail:
            check(any(c["name"] == args.expect_fail and c["verdict"] == "FAIL" for c in rep["checks"]),
                  f"check {args.expect_fail} did not fail")
        if args.expect_leaders:
            for fam in rep["families"]:
                if (fam, "rdma-counts") in ran:
                    check(any(ld["family"] == fam for n in rep["nodes"] for ld in n["leaders"]),
                          f"{fam}: no leader in the per-node report")
            # A leader that opened a device says how many RC QPs it keeps per
            # partner (the trace's qps-per-pair, MLXA2A_NET_STRIPES).
            for ld in (ld for n in rep["nodes"] for ld in n["leaders"]):
                check(ld["qps_per_pair"] >= 1,
                      f"{ld['family']} rank {ld['rank']}: qps_per_pair not reported")
        by_host = {n["host"]: n for n in rep["nodes"]}
        for host in filter(None, args.expect_leaders_on.split(",")):
            n = by_host.get(host)
            check(n is not None and n["ports"] and n["leaders"],
                  f"host {host}: no node entry with ports and leaders ({sorted(by_host)})")
    for e in errors:
        print("FAIL:", e)
    if errors:
        sys.exit(1)
    print(f"OK: {args.report}: schema holds, verdict {rep['verdict']}, {len(rep['checks'])} checks")


if __name__ == "__main__":
    main()
