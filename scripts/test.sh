#!/usr/bin/env bash
# README command 2: installs what is needed (scripts/setup.sh), builds with
# warnings as errors (scripts/build.sh) and runs the test suites.
#   scripts/test.sh                  every suite
#   scripts/test.sh --suite unit     only one suite (unit, rcache, shm, fakeverbs,
#                                    mpi, mpi-ompi, mpi-mpich); repeatable
#   scripts/test.sh --no-setup       skip apt-get (packages already present)
# Ends with one line "N passed, M failed"; exit status 0 only if M is 0.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}

setup=1
suites=()
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suites+=(--suite "$2"); shift 2 ;;
    --no-setup) setup=0; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

[ "$setup" = 1 ] && "$top/scripts/setup.sh"
BUILD_DIR="$build" "$top/scripts/build.sh"

# Open MPI refuses to run as root without these, and needs --oversubscribe when
# ranks outnumber cores (tests/mpi/run_mpi_test.py passes it).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

status=0
meson test -C "$build" --no-rebuild --print-errorlogs "${suites[@]}" || status=$?

python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = skipped = 0
for line in open(sys.argv[1]):
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
