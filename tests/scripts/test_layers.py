#!/usr/bin/env python3
"""docs/ARCHITECTURE.md's layers, checked on the sources: every #include of a
project header (and <mpi.h>) of shim/, rcache/ and every file of core/ points
down, by an explicit table of what each folder (or file) may include; inside
core/mpi, by its floors. A file no rule covers fails, so a new folder must be
placed in the picture before it builds a dependency.
Usage: test_layers.py SOURCE_ROOT. Prints one line per violation and
"N passed, M failed"; exit 1 on any."""
import pathlib
import re
import sys

# What every engine layer shares (core/*.h, MPI-free, no project includes but
# core/status.h).
SHARED = ("core/status.h", "core/arch.h", "core/bootstrap.h", "core/collective_setup.h",
          "core/wait_cpu.h", "core/log.h")
BELOW_CONFIG = ("core/config/", "core/route/route.h", "core/log.h", "core/status.h")
# The MPI-free core that core/mpi is built on (every folder of core/ but info/,
# which is a program: mlxa2a_info).
MPI_FREE_CORE = ("core/config/", "core/route/", "core/plan/", "core/tune/", "core/shm/", "core/hier/",
                 "core/mlx5/", "core/stats/", "core/version/", "core/selection.h",
                 "core/rcache_options.h") + SHARED

# Per folder or file, by path prefix (the longest that matches wins):
# (project headers it may include, by path prefix; may it include <mpi.h>?)
RULES = {
    # The shim packs arguments and calls core/mpi's entry surface, nothing else.
    "shim/": (("shim/", "core/mpi/abi.h", "core/mpi/dispatch.h", "core/mpi/lifecycle.h",
               "core/mpi/mpit.h", "core/mpi/stacking.h"), True),
    # Generic over a registrar: no MPI, no core.
    "rcache/": (("rcache/",), False),
    # core/mpi: MPI-aware, above all of MPI-free core. rcache/options.h: the
    # EngineSettings carry rcache::Options (filled by core/rcache_options.cc).
    # Inside core/mpi, the floors below.
    "core/mpi/": (("core/mpi/", "rcache/options.h") + MPI_FREE_CORE, True),
    # mlxa2a_info and mlxa2a_man: listings from the switch table, -V from
    # version/. core/tune/tune_file.h: mlxa2a_info lists the measured decisions
    # of MLXA2A_TUNE_FILE (render_tune_file), read through the tune file's one
    # parser so the listing cannot disagree with what tuning loads.
    "core/info/": (("core/info/", "core/config/", "core/version/", "core/tune/tune_file.h"),
                   False),
    "core/stats/": (("core/stats/",), False),
    "core/version/": (("core/version/",), False),
    "core/route/route": (("core/route/route.h",), False),
    "core/config/": (BELOW_CONFIG, False),
    "core/route/": (BELOW_CONFIG + ("core/route/",), False),
    # decide(): the serving plan, above the rules and a team's capabilities.
    "core/plan/": (BELOW_CONFIG + ("core/plan/", "core/selection.h"), False),
    "core/tune/": (BELOW_CONFIG + ("core/tune/", "core/route/"), False),
    # core/config/shm.h: the MLXA2A_SHM_* switches as plain data (no includes).
    "core/shm/": (("core/shm/", "core/config/shm.h") + SHARED, False),
    "core/hier/": (("core/hier/", "core/shm/") + SHARED, False),
    # core/config/net.h: the MLXA2A_NET_* switches as plain data (no includes);
    # core/version/version.h: compile-time constants only (the set-up cards
    # name the build, core/mlx5/setup_card.h).
    "core/mlx5/": (("core/mlx5/", "core/hier/", "rcache/", "core/config/net.h",
                    "core/version/version.h") + SHARED, False),
    # core's root files ("*": not its folders). The shared ones and selection
    # (a team's capabilities) include only the shared ones.
    "core/*": (SHARED, False),
    "core/selection": (("core/selection.h",), False),
    # Converts and validates the MLXA2A_RCACHE_* switches into rcache::Options:
    # the one place that knows both, so rcache/ includes nothing of core.
    "core/rcache_options": (("core/rcache_options.h", "core/config/", "rcache/options.h"),
                            False),
}

# core/mpi's floors, lowest first (docs/ARCHITECTURE.md "core/mpi's floors"):
# a file includes core/mpi headers of its own floor or below, never above.
# A module (x.h with x.cc) stands on one floor unless MPI_FILE_FLOOR says.
MPI_FLOORS = (
    ("base", ("stacking", "abi", "runtime", "counters", "build_info", "datatype",
              "headed_types", "mpit", "mpit_index", "group_bootstrap", "topology")),
    ("call", ("call", "job_stats", "mpit_cvars", "mpit_pvars")),
    ("engines", ("engine", "engine_pool", "shm_engine", "hier_engine", "hier_setup",
                 "hier_transports", "containment",
                 "pmpi_relay", "pmpi_transport")),
    ("team", ("team", "engine_call", "tune_store")),
    ("communicator", ("comm_state", "team_tuner")),
    ("serve", ("serve", "plan_steps")),
    ("dispatch", ("dispatch", "lifecycle")),
    ("entry", ()),
)
# Files standing above their header's floor, and why.
MPI_FILE_FLOOR = {
    # abi.h is on the base floor (stacking.cc counts PMPI entries through it);
    # abi.cc is the entry adapter: it calls the dispatcher.
    "core/mpi/abi.cc": "entry",
    # runtime.h is the process state every floor reads; runtime.cc's
    # initialisation and finalisation set up and tear down every floor
    # (world's team, the engine pool, the job report, the path counts' lines).
    "core/mpi/runtime.cc": "entry",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
PROJECT = ("core/", "rcache/", "shim/")


def covers(prefix, rel):
    if prefix.endswith("*"):  # the folder's own files only
        folder = prefix[:-1]
        return rel.startswith(folder) and "/" not in rel[len(folder):]
    return rel.startswith(prefix)


def rule_for(rel):
    best = None
    for prefix in RULES:
        if covers(prefix, rel) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def floor_of(rel):
    """Index of rel's floor in MPI_FLOORS (rel: core/mpi/x.h or .cc), or None."""
    names = [name for name, _ in MPI_FLOORS]
    if rel in MPI_FILE_FLOOR:
        return names.index(MPI_FILE_FLOOR[rel])
    stem = pathlib.PurePosixPath(rel).stem
    for i, (_, stems) in enumerate(MPI_FLOORS):
        if stem in stems:
            return i
    return None


def floor_violations(rel, includes):
    """core/mpi includes of rel that point above rel's floor, as messages."""
    mine = floor_of(rel)
    if mine is None:
        return ["stands on no floor of core/mpi (add it to MPI_FLOORS)"]
    bad = []
    for inc in includes:
        if not inc.startswith("core/mpi/"):
            continue
        theirs = floor_of(inc)
        if theirs is None or theirs > mine:
            where = MPI_FLOORS[theirs][0] if theirs is not None else "no"
            bad.append(f"includes {inc} ({where} floor, above {MPI_FLOORS[mine][0]})")
    return bad


def violations(rel, text):
    """What is wrong with rel's includes, one message each."""
    prefix = rule_for(rel)
    if prefix is None:
        return ["is covered by no rule of test_layers.py's table (add its folder)"]
    allowed, mpi_ok = RULES[prefix]
    includes = INCLUDE.findall(text)
    bad = []
    for inc in includes:
        if (inc == "mpi.h" and not mpi_ok) or \
                (inc.startswith(PROJECT) and not inc.startswith(allowed)):
            bad.append(f"includes {inc} ({prefix} layer)")
    if rel.startswith("core/mpi/"):
        bad += floor_violations(rel, includes)
    return bad


def main():
    root = pathlib.Path(sys.argv[1])
    passed = failed = 0
    for folder in ("core", "rcache", "shim"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".h", ".cc"):
                continue
            rel = path.relative_to(root).as_posix()
            bad = violations(rel, path.read_text(errors="replace"))
            if bad:
                failed += 1
                print(f"FAIL {rel} {'; '.join(bad)}")
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
