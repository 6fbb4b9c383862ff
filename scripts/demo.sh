#!/usr/bin/env bash
# The demo (README command 1), on a fresh Debian 12 machine: installs what
# mlxa2a needs (scripts/setup.sh), builds it (scripts/build.sh, into
# ${BUILD_DIR:-build}) and runs the side-by-side osu_alltoall
# comparison with and without mlxa2a at np=2 on Open MPI and on MPICH
# (scripts/compare.sh; extra arguments go to it, e.g. --rounds 9).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

echo "== demo: setup (Debian packages)"
"$top/scripts/setup.sh"
echo "== demo: build"
"$top/scripts/build.sh"
echo "== demo: osu_alltoall without and with mlxa2a, np=2, Open MPI and MPICH"
exec "$top/scripts/compare.sh" --np 2 --mpi both "$@"
