#!/usr/bin/env python3
"""scripts/hwcheck's report (docs/hwcheck.md, schema "mlxa2a-hwcheck/4"):
one JSON document and the same as a readable table, from what the checks
left in hwcheck's output directory:

  checks.tsv         family, check, verdict, seconds, detail (one per check)
  devices.tsv        host, hca, port, state, mtu, link layer (ibv_devinfo)
  FAMILY-stats.json  the rdma-counts run's MLXA2A_COLL_STATS=json report,
                     whose "fabric" entries are the leaders' devices
  FAMILY-osu.tsv     family, bytes per peer, PMPI us, mlxa2a us, ratio
  facts.out          each node's facts, ports and GIDs (hwcheck_fabric.py)
  counters-0.snap    the first counter snapshot (hwcheck_counters.py)
  counters.tsv       family, check, host, hca:port, counter, class, delta:
                     the counters that grew during a check

  hwcheck_report.py --out DIR --json FILE --text FILE [--meta KEY=VALUE]...

The verdict is FAIL when any check failed or none ran."""
import argparse
import json
import os
import sys

import hwcheck_counters
import hwcheck_fabric

SCHEMA = "mlxa2a-hwcheck/4"
FAMILY_LABEL = {"ompi": "Open MPI", "mpich": "MPICH", "all": "-"}


def rows(path, width):
    """Tab-separated rows of exactly `width` fields; missing file: none."""
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [r for r in (line.rstrip("\n").split("\t") for line in f) if len(r) == width]


def number(text):
    try:
        v = float(text)
    except ValueError:
        return None
    return int(v) if v.is_integer() and "." not in text else v


def leaders_of(out, families):
    """The fabric entries of each family's job report, tagged with the family."""
    found = []
    for fam in families:
        path = os.path.join(out, f"{fam}-stats.json")
        if not os.path.exists(path):
            continue
        try:
            with open(path) as f:
                fabric = json.load(f).get("fabric", [])
        except (OSError, ValueError):
            continue
        for entry in fabric:
            leader = dict(family=fam, **entry)
            # What the leader's queue pairs and registrations got (issue 39,
            # item 6): inline bytes as a number, "-" where not reported.
            leader["inline"] = number(str(leader.get("inline", "")))
            if leader["inline"] is None:
                leader["inline"] = -1
            leader.setdefault("relaxed_ordering", "-")
            leader.setdefault("hugepages", "-")
            # RC queue pairs per partner leader (MLXA2A_NET_STRIPES); -1: not reported.
            leader["qps_per_pair"] = number(str(leader.get("qps_per_pair", "")))
            if leader["qps_per_pair"] is None:
                leader["qps_per_pair"] = -1
            found.append(leader)
    return found


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return f.read().splitlines()


def grown_counters(out):
    """{(family, check): [counters that grew]} from counters.tsv."""
    grown = {}
    for fam, check, host, port, name, kind, delta in rows(os.path.join(out, "counters.tsv"), 7):
        grown.setdefault((fam, check), []).append(
            {"host": host, "port": port, "name": name, "kind": kind, "delta": number(delta)})
    return grown


def add_facts(nodes, out, virtual):
    """Each node's system facts and fabric ports; the reachability report."""
    facts = read_lines(os.path.join(out, "facts.out"))
    system, ports = hwcheck_fabric.system(facts), hwcheck_fabric.ports(facts)
    for host in sorted(set(system) | set(ports)):
        n = nodes.setdefault(host, {"host": host, "ports": [], "leaders": []})
        n["system"] = system.get(host, {})
        n["fabric_ports"] = ports.get(host, [])
    for n in nodes.values():
        n.setdefault("system", {})
        n.setdefault("fabric_ports", [])
    return hwcheck_fabric.reachability(ports, virtual)


def build(out, meta):
    families = meta.get("families", "").split()
    grown = grown_counters(out)
    checks = [{"family": f, "name": n, "verdict": v, "seconds": number(s) or 0.0, "detail": d,
               "counters": grown.get((f, n), [])}
              for f, n, v, s, d in rows(os.path.join(out, "checks.tsv"), 5)]
    nodes = {}
    for host, hca, port, state, mtu, link in rows(os.path.join(out, "devices.tsv"), 6):
        nodes.setdefault(host, {"host": host, "ports": [], "leaders": []})["ports"].append(
            {"hca": hca, "port": number(port), "state": state, "mtu": number(mtu),
             "link_layer": link})
    for leader in leaders_of(out, families):
        host = leader.get("host", "?")
        nodes.setdefault(host, {"host": host, "ports": [], "leaders": []})["leaders"].append(leader)
    osu = []
    for fam in families:
        for f, size, pmpi, mine, ratio in rows(os.path.join(out, f"{fam}-osu.tsv"), 5):
            osu.append({"family": f, "bytes_per_peer": number(size), "pmpi_us": number(pmpi),
                        "mlxa2a_us": number(mine), "ratio": number(ratio)})
    reach = add_facts(nodes, out, meta.get("virtual") == "1")
    failed = not checks or any(c["verdict"] == "FAIL" for c in checks)
    return {
        "schema": SCHEMA,
        "verdict": "FAIL" if failed else "PASS",
        "started": meta.get("started", ""),
        "seconds": number(meta.get("seconds", "0")) or 0.0,
        "mode": meta.get("mode", ""),
        "mlxa2a": meta.get("mlxa2a", ""),
        "launcher": meta.get("launcher", ""),
        "families": families,
        "node_count": number(meta.get("nodes", "0")) or 0,
        "ranks_per_node": number(meta.get("ranks_per_node", "0")) or 0,
        "load_average": meta.get("load_average", ""),
        "nodes": [nodes[h] for h in sorted(nodes)],
        "counters": hwcheck_counters.describe(
            hwcheck_counters.read(os.path.join(out, "counters-0.snap"))),
        "reachability": reach,
        "checks": checks,
        "osu": osu,
    }


def table(lines, header, body):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    for r in [header] + body:
        lines.append("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip())


def facts_text(lines, rep):
    """Each node's system facts, its ports' firmware and subnets, and which
    node pairs share a subnet."""
    lines += ["", "node facts (fork env: RDMAV_FORK_SAFE / IBV_FORK_SAFE as the node's shell sees them)"]
    table(lines, ["node", "ulimit -l", "kernel", "rdma-core", "fork env"],
          [[n["host"], n["system"].get("ulimit_l", "?"), n["system"].get("kernel", "?"),
            n["system"].get("rdma_core", "?"), n["system"].get("fork_env", "?")] for n in rep["nodes"]])
    lines += ["", "fabric (ibv_devinfo -v: firmware; subnet of GID 0 for InfiniBand, of each RoCE GID)"]
    body = [[n["host"], f"{p['hca']}:{p['port']}", p["link_layer"], p["fw_ver"], p["gids"],
             " ".join(p["subnets"]) or "-"] for n in rep["nodes"] for p in n["fabric_ports"]]
    if body:
        table(lines, ["node", "hca:port", "link layer", "firmware", "gids", "subnets"], body)
    else:
        lines.append("(no port listed)")
    lines += [f"reachability: {rep['reachability']['note']}", f"counters: {rep['counters']}"]


def counters_text(lines, rep):
    body = [[c["name"], c["family"], g["host"], g["port"], g["name"], g["kind"], f"+{g['delta']}"]
            for c in rep["checks"] for g in c["counters"]]
    if body:
        lines += ["", "counters that grew during a check (error: the check failed)"]
        table(lines, ["check", "family", "node", "hca:port", "counter", "kind", "delta"], body)


def text(rep):
    fams = " + ".join(FAMILY_LABEL.get(f, f) for f in rep["families"])
    lines = [f"mlxa2a hwcheck: {rep['verdict']}   {rep['node_count']} nodes x "
             f"{rep['ranks_per_node']} ranks ({rep['mode']}), {fams}, started {rep['started']}, "
             f"{rep['seconds']} s, load average {rep['load_average']}",
             f"build: {rep['mlxa2a']}", f"launcher: {rep['launcher']}", "", "ports (ibv_devinfo)"]
    table(lines, ["node", "hca:port", "state", "mtu", "link layer"],
          [[n["host"], f"{p['hca']}:{p['port']}", p["state"], p["mtu"], p["link_layer"]]
           for n in rep["nodes"] for p in n["ports"]])
    facts_text(lines, rep)
    lines += ["", "leaders (what mlxa2a chose; rdma-counts run)"]
    known = ("family", "rank", "host", "hca", "hca_by", "link", "tc", "sl", "pkey",
             "transports", "qps_created", "qps_live", "mrs_live", "qps_per_pair", "inline",
             "relaxed_ordering", "hugepages")
    body = []
    for n in rep["nodes"]:
        for ld in n["leaders"]:
            more = " ".join(f"{k}={v}" for k, v in ld.items() if k not in known)
            body.append([n["host"], ld["family"], ld.get("rank"), ld.get("hca"), ld.get("hca_by"),
                         ld.get("link"), ld.get("tc"), ld.get("sl"), ld.get("pkey"),
                         ld.get("transports", "-"), f"{ld.get('qps_created')}/{ld.get('qps_live')}",
                         ld.get("qps_per_pair"), ld.get("mrs_live"), ld.get("inline"), ld.get("relaxed_ordering"),
                         ld.get("hugepages"), more])
    if body:
        table(lines, ["node", "family", "rank", "hca", "chosen by", "link", "tc", "sl", "pkey",
                      "transport (RC/DC)", "qps made/live", "qps/pair", "mrs live", "inline", "relaxed ord.",
                      "hugepages", "more"], body)
    else:
        lines.append("(none reported: see the rdma-counts check)")
    lines += ["", "checks"]
    table(lines, ["check", "family", "verdict", "seconds", "detail"],
          [[c["name"], c["family"], c["verdict"], c["seconds"], c["detail"]] for c in rep["checks"]])
    counters_text(lines, rep)
    if rep["osu"]:
        lines += ["", "osu_alltoall (median us over rounds; ratio = mlxa2a / PMPI, below 1 is faster)"]
        table(lines, ["family", "bytes", "PMPI us", "mlxa2a us", "ratio"],
              [[o["family"], o["bytes_per_peer"], o["pmpi_us"], o["mlxa2a_us"], o["ratio"]]
               for o in rep["osu"]])
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--meta", action="append", default=[])
    args = ap.parse_args()
    meta = dict(m.split("=", 1) for m in args.meta if "=" in m)
    rep = build(args.out, meta)
    with open(args.json, "w") as f:
        json.dump(rep, f, indent=2)
        f.write("\n")
    with open(args.text, "w") as f:
        f.write(text(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
