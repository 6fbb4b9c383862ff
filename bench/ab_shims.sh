#!/usr/bin/env bash
# Runs an osu_alltoall-style benchmark without mlxa2a and with each of
# several shims, alternating in every round (the order rotated from round to
# round), and prints per size the median over rounds of each mode's latency
# and its ratio to the MPI alone. For before/after comparisons of two builds
# in one run on one machine (the load changes from minute to minute;
# alternating spreads it over all modes). Every round also runs a control,
# the first shim with MLXA2A_TUNE=pmpi (every call passes through to
# PMPI_Alltoall): control/none and ctl-spread (its largest |control/none - 1|
# over rounds) say how far a ratio must be from 1 to be more than noise;
# --no-control skips it (bench/ratio_table.py).
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
here=$(cd "$(dirname "$0")" && pwd)
mpi=ompi np=2 rounds=5 names=() shims=() envs=() control=1
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi) mpi=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --shim) names+=("${2%%=*}"); shims+=("$(realpath "${2#*=}")"); shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --no-control) control=0; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "no benchmark command after --" >&2; exit 2; }
[ ${#shims[@]} -gt 0 ] || control=0  # (nothing to pass through)
if [ "$control" = 1 ]; then
  for n in "${names[@]}"; do [ "$n" != control ] || { echo "--no-control to name a shim 'control'" >&2; exit 2; }; done
  names+=(control) shims+=("${shims[0]}") envs+=(control:MLXA2A_TUNE=pmpi)
fi
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
modes=(none "${names[@]}") shims=("" "${shims[@]}")
for ((r = 1; r <= rounds; r++)); do
  for ((p = 0; p < ${#modes[@]}; p++)); do  # round r starts r - 1 modes further on
    i=$(((r - 1 + p) % ${#modes[@]}))
    launch "${shims[$i]}" "$out/${modes[$i]}.$r" "${modes[$i]}"
    awk -v m="${modes[$i]}" -v r="$r" '$1 ~ /^[0-9]+$/ && NF >= 2 { print m, r, $1, $2 }' \
      "$out/${modes[$i]}.$r" >>"$out/data"
  done
done
ctl=(); [ "$control" = 0 ] || ctl=(--control control)
"$here/ratio_table.py" "$out/data" "${ctl[@]+"${ctl[@]}"}" "${modes[@]}"
