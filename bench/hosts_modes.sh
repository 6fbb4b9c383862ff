#!/usr/bin/env bash
# Alternating osu_alltoall runs on a pretend cluster, any modes in each
# round (compare.sh has its fixed three): each mode is "NAME" (no mlxa2a) or
# "NAME=SHIM[,VAR=VAL...]" (LD_PRELOAD=SHIM plus switches). Prints, per size,
# the median over rounds of each mode and its ratio to the first mode. The
# order rotates from round to round. A mode with MLXA2A_TUNE=pmpi (the first
# such) is the control, the MPI against itself through the shim: ctl-spread,
# its largest |control/first - 1| over rounds, is the noise band the other
# ratios must leave (bench/ratio_table.py).
# Run inside `scripts/cluster run --hosts N --expose DIR... --`. --keep DIR
# keeps each run's output (DIR/MODE-ROUND.out). --done RE: a run is over
# once a line matches RE (OSU's last size, say '^4096 '); MPICH 4.0.2 may then
# hang in MPI_Finalize (docs/hosts.md): launch ends it after 5 s.
#   bench/hosts_modes.sh --ranks 2,2,2 --rounds 3 --bench OSU -- -m 1:4096 \
#     -- none new=build/shim/libmlxa2a-ompi.so pmpi=build/shim/libmlxa2a-ompi.so,MLXA2A_TUNE=pmpi
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
ranks=2,2 rounds=3 bench="" family=ompi keep="" done=()
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --family) family=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;  # every run's output kept there
    --done) done=(--done-pattern "$2" --done-count 1 --finalize-grace 5); shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
shift
modes=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=${keep:-$(mktemp -d)}
mkdir -p "$out"
control=()
for m in "${modes[@]}"; do
  [[ ${#control[@]} = 0 && $m == *,MLXA2A_TUNE=pmpi* ]] && control=(--control "${m%%=*}")
done
for r in $(seq "$rounds"); do
  for ((p = 0; p < ${#modes[@]}; p++)); do  # round r starts r - 1 modes further on
    m=${modes[(r - 1 + p) % ${#modes[@]}]}
    name=${m%%=*} env=()
    if [[ $m == *=* ]]; then
      IFS=, read -ra kv <<<"${m#*=}"
      env=(--env "LD_PRELOAD=${kv[0]}")
      for e in "${kv[@]:1}"; do env+=(--env "$e"); done
    fi
    echo "# round $r $name load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    "$top/scripts/cluster" launch --family "$family" --ranks "$ranks" "${env[@]}" "${done[@]}" \
      -- "$bench" "${args[@]}" >"$out/$name-$r.out" 2>&1 || echo "# $name round $r failed" >&2
    awk -v m="$name" -v r="$r" '/^[0-9]/ {print m, r, $1, $2}' "$out/$name-$r.out" >>"$out/data"
  done
done
"$top/bench/ratio_table.py" --markdown "${control[@]+"${control[@]}"}" "$out/data" "${modes[@]%%=*}"
[ -n "$keep" ] || rm -rf "$out"
