#!/usr/bin/env bash
# Runs an osu_alltoall-style benchmark without mlxa2a and with each of
# several shims, alternating in every round, and prints per size the median
# over rounds of each mode's latency and its ratio to the MPI alone. For
# before/after comparisons of two builds in one run on one machine (the
# load changes from minute to minute; alternating spreads it over all modes).
#
#   bench/ab_shims.sh --mpi ompi --np 4 --rounds 5 \
#       --shim before=/tmp/old/build/shim/libmlxa2a-ompi.so \
#       --shim after=build/shim/libmlxa2a-ompi.so \
#       -- /work/osu/openmpi/osu_alltoall -m 1:1048576 -i 200 -x 20
#
# --env NAME:VAR=VAL sets VAR for mode NAME's ranks only (repeatable), so one
# shim can appear as several modes, e.g. a forced path beside auto:
#   --shim auto=$S --shim copy=$S --env copy:MLXA2A_TUNE=0-inf:shm
set -euo pipefail
mpi=ompi np=2 rounds=5 names=() shims=() envs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi) mpi=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --shim) names+=("${2%%=*}"); shims+=("$(realpath "${2#*=}")"); shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "no benchmark command after --" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
launch() {  # launch SHIM(or empty) OUTFILE [MODE]
  local pre=() e var
  if [ -n "$1" ]; then
    pre=("LD_PRELOAD=$1")
    for e in "${envs[@]}"; do [ "${e%%:*}" = "${3:-}" ] && pre+=("${e#*:}"); done
  fi
  local args=()
  for var in "${pre[@]}"; do
    if [ "$mpi" = ompi ]; then args+=(-x "$var"); else args+=(-genv "${var%%=*}" "${var#*=}"); fi
  done
  if [ "$mpi" = ompi ]; then
    mpirun.openmpi --oversubscribe -np "$np" "${args[@]}" "${cmd[@]}" >"$2"
  else
    mpiexec.mpich -n "$np" "${args[@]}" "${cmd[@]}" >"$2"
  fi
}
cmd=("$@")
for ((r = 1; r <= rounds; r++)); do
  launch "" "$out/none.$r"
  for i in "${!shims[@]}"; do launch "${shims[$i]}" "$out/${names[$i]}.$r" "${names[$i]}"; done
done
python3 - "$out" "$rounds" none "${names[@]}" <<'PY'
import re, statistics, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def table(path):
    rows = re.findall(r"^\s*(\d+)\s+([\d.]+)", open(path).read(), re.M)
    return {int(b): float(t) for b, t in rows}
med = {}
for m in modes:
    runs = [table(f"{out}/{m}.{r}") for r in range(1, rounds + 1)]
    med[m] = {b: statistics.median(t[b] for t in runs if b in t) for b in runs[0]}
print("# bytes " + " ".join(f"{m}(us)" for m in modes) + " " +
      " ".join(f"{m}/none" for m in modes[1:]))
for b in sorted(med["none"]):
    base = med["none"][b]
    print(f"{b} " + " ".join(f"{med[m][b]:.2f}" for m in modes) + " " +
          " ".join(f"{med[m][b] / base:.2f}" for m in modes[1:]))
PY
