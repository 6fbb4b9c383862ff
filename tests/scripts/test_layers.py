#!/usr/bin/env python3
"""docs/ARCHITECTURE.md's layers, checked on the sources: every #include of a
project header (and <mpi.h>) points down. Usage: test_layers.py SOURCE_ROOT.
Prints one line per violation and "N passed, M failed"; exit 1 on any."""
import pathlib
import re
import sys

# Per folder: (project headers it may include, by path prefix; may it include <mpi.h>?)
BELOW_CONFIG = ("core/config/", "core/route/route.h", "core/log.h", "core/status.h")
# What every engine layer shares (core/*.h, MPI-free).
SHARED = ("core/status.h", "core/arch.h", "core/bootstrap.h", "core/collective_setup.h",
          "core/wait_cpu.h", "core/log.h")
RULES = {
    "rcache/": (("rcache/",), False),
    "core/route/route": (("core/route/route.h",), False),
    "core/config/": (BELOW_CONFIG, False),
    "core/route/": (BELOW_CONFIG + ("core/route/", "core/selection.h"), False),
    "core/tune/": (BELOW_CONFIG + ("core/tune/", "core/route/"), False),
    # core/config/shm.h: the MLXA2A_SHM_* switches as plain data (no includes).
    "core/shm/": (("core/shm/", "core/config/shm.h") + SHARED, False),
    "core/hier/": (("core/hier/", "core/shm/") + SHARED, False),
    # core/config/net.h: the MLXA2A_NET_* switches as plain data (no includes);
    # core/version/version.h: compile-time constants only (the set-up cards
    # name the build, core/mlx5/setup_card.h).
    "core/mlx5/": (("core/mlx5/", "core/hier/", "rcache/", "core/config/net.h",
                    "core/version/version.h") + SHARED, False),
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def rule_for(rel):
    best = None
    for prefix in RULES:
        if rel.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def main():
    root = pathlib.Path(sys.argv[1])
    passed = failed = 0
    for path in sorted(root.glob("core/**/*")) + sorted(root.glob("rcache/**/*")):
        if path.suffix not in (".h", ".cc") or "/build" in str(path):
            continue
        rel = path.relative_to(root).as_posix()
        prefix = rule_for(rel)
        if prefix is None:
            continue
        allowed, mpi_ok = RULES[prefix]
        bad = []
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            if inc == "mpi.h" and not mpi_ok:
                bad.append(inc)
            elif (inc.startswith("core/") or inc.startswith("rcache/")) and \
                    not inc.startswith(allowed):
                bad.append(inc)
        if bad:
            failed += 1
            print(f"FAIL {rel} ({prefix} layer) includes {', '.join(bad)}")
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
