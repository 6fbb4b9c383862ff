#!/usr/bin/env python3
"""scripts/hwcheck's HCA counters (docs/hwcheck.md, "Counters"): the
snapshots every node takes of /sys/class/infiniband/*/ports/*/hw_counters
and counters/ before and after each check (hwcheck_fabric.sh prints them as
"host|<hca>/ports/<port>/<dir>/<name> <value>" lines, or "host|none" on a
node without the directory), their difference, and the check's verdict:

  * an error counter that grew (ERRORS) fails the check;
  * ECN/CNP marks and PFC pauses that grew are reported, never failed on.

  hwcheck_counters.py judge OUT FAMILY CHECK BEFORE AFTER

amends the check's line in OUT/checks.tsv when a counter grew (FAIL when an
error counter did; what grew appended to its detail), adds the differences to
OUT/counters.tsv (family, check, host, hca:port, counter, class, delta) and
exits 1 when it failed the check."""
import os
import sys

ERRORS = ("local_ack_timeout_err", "rnr_nak_retry_err", "out_of_sequence", "packet_seq_err")
NO_SYSFS = "no counters (no /sys/class/infiniband)"


def kind_of(name):
    """error, ecn (ECN marks and congestion notification packets), pfc
    (pause frames), or None for a counter only recorded."""
    if name in ERRORS:
        return "error"
    if "ecn" in name or "cnp" in name:
        return "ecn"
    if "pause" in name or "pfc" in name:
        return "pfc"
    return None


def parse(lines):
    """{host: {(hca:port, counter): value}}; a host without counters maps
    to None."""
    snap = {}
    for line in lines:
        host, sep, rest = line.rstrip("\n").partition("|")
        if not sep:
            continue
        if rest == "none":
            snap.setdefault(host, None)
            continue
        path, _, value = rest.rpartition(" ")
        parts = path.split("/")  # hca, "ports", port, dir, name
        if len(parts) != 5 or not value.strip().isdigit():
            continue
        counters = snap.get(host) or {}
        counters[(f"{parts[0]}:{parts[2]}", parts[4])] = int(value)
        snap[host] = counters
    return snap


def read(path):
    if not os.path.exists(path):
        return {}
    with open(path, errors="replace") as f:
        return parse(f)


def diff(before, after):
    """The counters that grew, classified: [(host, port, name, kind, delta)]
    sorted; counters only recorded (kind None) are left out."""
    grown = []
    for host, now in sorted(after.items()):
        then = before.get(host) or {}
        for (port, name), value in sorted((now or {}).items()):
            kind = kind_of(name)
            delta = value - then.get((port, name), value)
            if kind and delta > 0:
                grown.append((host, port, name, kind, delta))
    return grown


def describe(snap):
    """What the snapshots cover, for the report's header."""
    hosts = [h for h, c in snap.items() if c]
    if not hosts:
        return NO_SYSFS
    ports = {(h, p) for h in hosts for p, _ in snap[h]}
    without = sorted(h for h, c in snap.items() if not c)
    return (f"{sum(len(snap[h]) for h in hosts)} counters of {len(ports)} ports on {len(hosts)} "
            f"node(s)" + (f"; none on {', '.join(without)}" if without else ""))


def amend(checks_tsv, family, check, failed, note):
    """Appends `note` to the last line of (family, check) in checks.tsv and
    makes it FAIL when `failed`."""
    with open(checks_tsv) as f:
        lines = f.read().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        fields = lines[i].split("\t")
        if len(fields) == 5 and fields[0] == family and fields[1] == check:
            if failed:
                fields[2] = "FAIL"
            fields[4] = f"{fields[4]}; {note}"
            lines[i] = "\t".join(fields)
            break
    with open(checks_tsv, "w") as f:
        f.write("".join(line + "\n" for line in lines))


def judge(out, family, check, before_path, after_path):
    grown = diff(read(before_path), read(after_path))
    if not grown:
        return 0
    failed = any(kind == "error" for *_, kind, _ in grown)
    what = ", ".join(f"{h} {p} {n} +{d}" for h, p, n, _, d in grown)
    amend(os.path.join(out, "checks.tsv"), family, check, failed,
          ("error counters grew: " if failed else "counters grew: ") + what)
    with open(os.path.join(out, "counters.tsv"), "a") as f:
        for host, port, name, kind, delta in grown:
            f.write(f"{family}\t{check}\t{host}\t{port}\t{name}\t{kind}\t{delta}\n")
    return 1 if failed else 0


def main(argv):
    if len(argv) == 6 and argv[0] == "judge":
        return judge(*argv[1:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
