#!/usr/bin/env bash
# The demo (README command 1), on a fresh Debian 12 machine: installs what
# mlxa2a needs (scripts/setup.sh), builds it (scripts/build.sh, into
# ${BUILD_DIR:-build}) and runs the side-by-side osu_alltoall
# comparison with and without mlxa2a at np=2 on Open MPI and on MPICH
# (scripts/compare.sh; extra arguments go to it, e.g. --rounds 9), then
# prints where its picture (latencies, ratio, min-max bands; gnuplot) and
# every round's numbers (CSV) are: ${DEMO_OUT:-<build>/demo}/compare.{png,csv}.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$top/build}
out=${DEMO_OUT:-$build/demo}

echo "== demo: setup (Debian packages)"
"$top/scripts/setup.sh"
echo "== demo: build"
"$top/scripts/build.sh"
echo "== demo: osu_alltoall without and with mlxa2a, np=2, Open MPI and MPICH"
mkdir -p "$out"
"$top/scripts/compare.sh" --np 2 --mpi both --csv "$out/compare.csv" --plot "$out/compare.png" "$@"
echo "== demo: picture: $out/compare.png"
echo "== demo: every round: $out/compare.csv"
