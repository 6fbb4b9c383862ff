#!/usr/bin/env bash
# Installs everything mlxa2a needs on Debian 12 (bookworm). Idempotent.
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

PACKAGES=(
  build-essential g++ gfortran meson ninja-build pkg-config python3 binutils
  libopenmpi-dev openmpi-bin
  libmpich-dev mpich
  libibverbs-dev rdma-core ibverbs-utils
  libhwloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libucx-dev
  gnuplot-nox
  valgrind  # callgrind: the instruction budgets (suite budget, bench/instruction_budget.py)
  python3-mpi4py  # mlxa2a-run with Python (tests/scripts); Debian builds it for Open MPI
)

# One dpkg-query for all packages (one per package took ~6 s on a loaded CI machine).
declare -A installed=()
while IFS=$'\t' read -r name status; do
  [ "$status" = "install ok installed" ] && installed[$name]=1
done < <(dpkg-query -W -f='${Package}\t${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
missing=()
for p in "${PACKAGES[@]}"; do
  [ -n "${installed[$p]:-}" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
