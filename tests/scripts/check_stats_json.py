#!/usr/bin/env python3
"""Validates an MLXA2A_COLL_STATS=json report against docs/stats.md's schema
and against the same run's trace (MLXA2A_COLL_TRACE=info output of all ranks).

  check_stats_json.py REPORT TRACE_FILE NP [--expect-tuning] [--expect-rdma]

The schema check is strict: exactly the documented keys and types. The trace
check recomputes, per communicator size and path, each rank's calls and bytes
and their min/median/max over ranks, and the set of measured decisions; they
must equal the report's."""
import json
import re
import statistics
import sys
from collections import defaultdict

TOP = {"schema", "mlxa2a", "ranks", "unreadable_lines", "calls", "tuning", "counters", "setup",
       "fabric"}
# fabric[]: these always; further string fields (gid, ...) as the trace line grows.
FABRIC = {"rank", "host", "hca", "hca_by", "link", "tc", "sl", "pkey", "qps_created",
          "qps_live", "mrs_live"}
CALL = {"comm_size", "path", "ranks", "calls", "bytes", "seconds"}
TUNING = {"comm_size", "bytes_per_peer_from", "bytes_per_peer_to", "path", "ranks",
          "medians_seconds", "agreement_seconds"}
PATHS = {"pmpi", "shm", "rdma"}
CANDIDATES = {"pmpi", "line", "copy", "cma", "hier", "rdma", "zcopy"}
COUNTERS = {"rdma_writes_posted", "rdma_bytes_written", "rdma_qps_live", "rdma_mrs_live",
            "rdma_messages_relayed",
            "zcopy_bytes_copied_on_node", "zcopy_bytes_zero_copy", "zcopy_staged_fallbacks",
            "rcache_hits", "rcache_misses", "rcache_evictions", "rcache_invalidations",
            "registrations_refused", "wait_cpu_seconds"}
SETUP = {"init_seconds", "rdma_qps_created", "rdma_setup_bytes", "rdma_setup_collectives",
         "tuning_trial_calls", "tuning_agreements",
         "tuning_agreement_seconds"}

errors = []


def check(cond, what):
    if not cond:
        errors.append(what)
    return cond


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def spread_ok(s, where):
    if not check(isinstance(s, dict) and set(s) == {"min", "median", "max"},
                 f"{where}: not a {{min, median, max}} object: {s!r}"):
        return
    ok = all(isinstance(s[k], (int, float)) and not isinstance(s[k], bool) for k in s)
    if check(ok, f"{where}: non-numbers {s!r}"):
        check(0 <= s["min"] <= s["median"] <= s["max"], f"{where}: not 0 <= min <= median <= max: {s!r}")


def spread_of(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def validate_schema(rep, np_):
    check(set(rep) == TOP, f"top-level keys {sorted(rep)} != {sorted(TOP)}")
    check(rep.get("schema") == "mlxa2a-coll-stats/1", f"schema {rep.get('schema')!r}")
    check(isinstance(rep.get("mlxa2a"), str) and rep["mlxa2a"].startswith("mlxa2a "),
          "mlxa2a: not the build line")
    check(rep.get("ranks") == np_, f"ranks {rep.get('ranks')} != {np_}")
    check(rep.get("unreadable_lines") == 0, "unreadable_lines != 0")
    keys = [(c.get("comm_size"), c.get("path")) for c in rep.get("calls", [])]
    check(keys == sorted(set(keys)), "calls not sorted by (comm_size, path) or repeated")
    for i, c in enumerate(rep.get("calls", [])):
        where = f"calls[{i}]"
        check(set(c) == CALL, f"{where}: keys {sorted(c)}")
        check(is_int(c.get("comm_size")) and c["comm_size"] >= 1, f"{where}: comm_size")
        check(c.get("path") in PATHS, f"{where}: path {c.get('path')!r}")
        check(is_int(c.get("ranks")) and 1 <= c["ranks"] <= np_, f"{where}: ranks")
        for k in ("calls", "bytes", "seconds"):
            spread_ok(c.get(k), f"{where}.{k}")
    for i, t in enumerate(rep.get("tuning", [])):
        where = f"tuning[{i}]"
        check(set(t) == TUNING, f"{where}: keys {sorted(t)}")
        lo, hi = t.get("bytes_per_peer_from"), t.get("bytes_per_peer_to")
        check(is_int(lo) and lo > 0 and lo & (lo - 1) == 0 and hi == 2 * lo - 1,
              f"{where}: size range {lo}..{hi}")
        med = t.get("medians_seconds", {})
        check(isinstance(med, dict) and set(med) <= CANDIDATES and t.get("path") in med,
              f"{where}: medians_seconds {med!r} / path {t.get('path')!r}")
        check(all(isinstance(v, (int, float)) and v >= 0 for v in med.values()), f"{where}: medians")
        check(is_int(t.get("ranks")) and 1 <= t["ranks"] <= np_, f"{where}: ranks")
        spread_ok(t.get("agreement_seconds"), f"{where}.agreement_seconds")
    for name, want in (("counters", COUNTERS), ("setup", SETUP)):
        got = rep.get(name, {})
        check(isinstance(got, dict) and set(got) == want, f"{name}: keys {sorted(got)}")
        for k, s in got.items():
            spread_ok(s, f"{name}.{k}")
    ranks_seen = []
    for i, f in enumerate(rep.get("fabric", [])):
        where = f"fabric[{i}]"
        check(isinstance(f, dict) and FABRIC <= set(f), f"{where}: keys {sorted(f)} lack {FABRIC}")
        if not isinstance(f, dict):
            continue
        check(is_int(f.get("rank")) and 0 <= f["rank"] < np_, f"{where}: rank")
        ranks_seen.append(f.get("rank"))
        check(re.fullmatch(r"[^:\s]+:\d+", str(f.get("hca"))), f"{where}: hca {f.get('hca')!r}")
        check(f.get("link") in ("ib", "roce"), f"{where}: link {f.get('link')!r}")
        for k in ("qps_created", "qps_live", "mrs_live"):
            check(is_int(f.get(k)) and f[k] >= 0, f"{where}: {k}")
        for k in set(f) - {"rank", "qps_created", "qps_live", "mrs_live"}:
            check(isinstance(f[k], str), f"{where}: {k} not a string")
    check(ranks_seen == sorted(set(ranks_seen)), "fabric not sorted by rank or repeated")


LINE = re.compile(r"^\[mlxa2a (\d+):\d+\] coll: \S+ .* np=(-?\d+) rank=-?\d+ "
                  r"bytes_per_peer=(\d+) in_place=\d path=(\S+) reason=(.*)$", re.M)
TUNED = re.compile(r"^tuned: (\S+) \(max-over-ranks medians")


def validate_against_trace(rep, trace):
    per_rank = defaultdict(lambda: defaultdict(lambda: [0, 0]))  # key -> rank -> [calls, bytes]
    decided = set()
    for rank, np_, bpp, path, reason in LINE.findall(trace):
        np_ = int(np_)
        if np_ < 0:
            continue  # MPI_COMM_NULL: PMPI rejects it, nothing to file it under
        entry = per_rank[(np_, path)][int(rank)]
        entry[0] += 1
        entry[1] += int(bpp) * np_
        m = TUNED.match(reason)
        if m:
            decided.add((np_, 1 << (int(bpp).bit_length() - 1), m.group(1)))
    check(per_rank, "no traced calls")
    by_key = {(c["comm_size"], c["path"]): c for c in rep.get("calls", [])}
    check(set(by_key) == set(per_rank),
          f"(comm_size, path) keys: report {sorted(by_key)} != trace {sorted(per_rank)}")
    for key, ranks in per_rank.items():
        c = by_key.get(key)
        if not c:
            continue
        check(c["ranks"] == len(ranks), f"{key}: ranks {c['ranks']} != trace {len(ranks)}")
        for i, k in enumerate(("calls", "bytes")):
            want = spread_of([v[i] for v in ranks.values()])
            check(c[k] == want, f"{key}.{k}: report {c[k]} != trace {want}")
    got = {(t["comm_size"], t["bytes_per_peer_from"], t["path"]) for t in rep.get("tuning", [])}
    # A class decided at its last call has no later call to trace "tuned:":
    # every traced decision is reported, not every reported one traced.
    check(decided <= got, f"tuning decisions: trace {sorted(decided - got)} not in the report")
    return len(decided)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        rep = json.load(f)
    with open(sys.argv[2], errors="replace") as f:
        trace = f.read()
    validate_schema(rep, int(sys.argv[3]))
    decisions = validate_against_trace(rep, trace)
    if "--expect-tuning" in sys.argv:
        check(decisions > 0, "no measured decision in the run")
    if "--expect-rdma" in sys.argv:
        check(any(c["path"] == "rdma" for c in rep["calls"]), "no call took path rdma")
        check(rep["counters"]["rdma_writes_posted"]["max"] > 0, "no RDMA write counted")
        check(rep["counters"]["rdma_bytes_written"]["max"] > 0, "no RDMA byte counted")
        check(rep["setup"]["rdma_qps_created"]["max"] > 0, "no queue pair counted")
        check(len(rep["fabric"]) > 0, "no rank reported its RDMA device (fabric)")
    for e in errors:
        print("FAIL:", e)
    if errors:
        sys.exit(1)
    print(f"OK: schema and trace agree ({len(rep['calls'])} call groups, {decisions} decisions)")


if __name__ == "__main__":
    main()
