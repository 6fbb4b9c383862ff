#!/usr/bin/env bash
# README command 2: installs what is needed (scripts/setup.sh), builds with
# warnings as errors (scripts/build.sh) and runs the test suites.
#   scripts/test.sh                  every suite
#   scripts/test.sh --suite unit     only one suite (unit, rcache, shm, fakeverbs,
#                                    mpi, mpi-ompi, mpi-mpich, hosts, hosts-ompi,
#                                    hosts-mpich, bench, budget); repeatable. hosts: MPI jobs on
#                                    pretend hosts (docs/hosts.md; root, else skipped)
#   scripts/test.sh --no-setup       skip apt-get (packages already present)
# Without --suite it also builds the registration cache, shared-memory and
# RDMA/zero-copy (tests/mlx5, over fakeverbs) tests
# with AddressSanitizer + UndefinedBehaviorSanitizer (in ${BUILD_DIR}-sanitize)
# and runs them; `--suite sanitize` runs only that.
# Ends with one line "N passed, M failed"; exit status 0 only if M is 0.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}

setup=1
suites=()
sanitize=1
plain=1
while [ $# -gt 0 ]; do
  case "$1" in
    --suite)
      if [ "$2" = sanitize ]; then plain=0; else suites+=(--suite "$2"); sanitize=0; fi
      shift 2 ;;
    --no-setup) setup=0; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$setup" = 1 ]; then "$top/scripts/setup.sh"; fi
BUILD_DIR="$build" "$top/scripts/build.sh"

# Open MPI refuses to run as root without these, and needs --oversubscribe when
# ranks outnumber cores (tests/mpi/run_mpi_test.py passes it).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

status=0
logs=()
if [ "$plain" = 1 ]; then
  meson test -C "$build" --no-rebuild --print-errorlogs "${suites[@]}" || status=$?
  logs+=("$build/meson-logs/testlog.json")
fi

if [ "$sanitize" = 1 ]; then
  san="$build-sanitize"
  # -O1 (AddressSanitizer's documentation suggests it): -O2 compiled the
  # largest files with 1.8x the CPU, and this build took 400 s of CI's 27 min.
  if [ ! -f "$san/build.ninja" ]; then
    meson setup "$san" "$top" -Dwerror=true -Dbuildtype=debugoptimized -Doptimization=1 \
      -Db_sanitize=address,undefined -Db_lundef=false
  fi
  ninja -C "$san" tests/rcache/test_rcache_patch tests/rcache/test_rcache_patch_race \
    tests/rcache/test_rcache_ucm tests/shm/test_shm tests/mlx5/test_mlx5 tests/mlx5/test_mlx5_fabric \
    tests/fakeverbs/lib/libibverbs.so.1 tests/fakeverbs/lib/libmlx5.so.1
  # Any sanitizer report fails the test instead of only being printed.
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C "$san" --no-rebuild --print-errorlogs --suite rcache --suite shm \
      --suite mlx5 || status=$?
  logs+=("$san/meson-logs/testlog.json")
fi

# fakeverbs files of test processes killed with SIGKILL in a shared rendezvous
# directory (the MPI and mlx5 harnesses already remove their per-run ones).
python3 "$top/tests/fakeverbs/leftovers.py" sweep || true

python3 - "${logs[@]}" <<'PY'
import json, sys
passed = failed = skipped = 0
for line in (l for path in sys.argv[1:] for l in open(path)):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif r == "SKIP":
        skipped += 1
    else:
        failed += 1
extra = f", {skipped} skipped" if skipped else ""
print(f"{passed} passed, {failed} failed{extra}")
PY
exit $status
