#!/usr/bin/env python3
"""Per-size table of alternating benchmark runs (bench/ab_shims.sh,
bench/hosts_modes.sh): the median over rounds of each mode's latency, each
mode's ratio to the base mode (of the medians) and, given a control mode
(mlxa2a preloaded with MLXA2A_TUNE=pmpi: the MPI against itself), the noise
band "ctl-spread": the largest |control / base - 1| over the rounds, each
round's control run over the same round's base run. A ratio within
1 +- ctl-spread is within what this run's control showed.

  ratio_table.py DATA [--markdown] [--control MODE] BASE MODE...

DATA: lines "MODE ROUND SIZE LATENCY".
"""
import argparse
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("modes", nargs="+", help="the base mode first")
    ap.add_argument("--control", help="the pass-through control's mode")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    runs = {}  # (mode, size) -> {round: latency}
    with open(a.data) as f:
        for line in f:
            mode, rnd, size, lat = line.split()
            runs.setdefault((mode, int(size)), {})[rnd] = float(lat)
    base, others = a.modes[0], a.modes[1:]
    sizes = sorted({s for m, s in runs if m == base})
    med = {k: statistics.median(v.values()) for k, v in runs.items()}
    head = ["bytes"] + [f"{m}(us)" for m in a.modes] + [f"{m}/{base}" for m in others]
    if a.control:
        head.append("ctl-spread")
    rows = []
    for s in sizes:
        row = [str(s)] + [f"{med[m, s]:.2f}" if (m, s) in med else "-" for m in a.modes]
        row += [f"{med[m, s] / med[base, s]:.2f}" if (m, s) in med else "-" for m in others]
        if a.control:
            ctl, off = runs.get((a.control, s), {}), runs[base, s]
            devs = [abs(ctl[r] / off[r] - 1) for r in ctl if off.get(r)]
            row.append(f"{max(devs):.2f}" if devs else "-")
        rows.append(row)
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "--:|" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        print("# " + " ".join(head))
        for row in rows:
            print(" ".join(row))


if __name__ == "__main__":
    main()
