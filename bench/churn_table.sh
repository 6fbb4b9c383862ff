#!/usr/bin/env bash
# Communicator churn table (issue 24, item 4): bench/comm_churn with and
# without mlxa2a, alternating, for every kind of communicator, with and
# without a parent alltoall, on one node and on 2 virtual nodes, at the
# machine's load and (--load N) with N busy loops of our own beside it.
# Prints one markdown row per case: medians of each side's per-round medians,
# their ratio, and the 1-minute load average seen at the case's start. Each
# round also runs a control, the shim with MLXA2A_TUNE=pmpi (MPI_Alltoall
# passes through; what the shim does when communicators are made may stay, so
# here the control's ratio is noise plus that), the order rotating per round:
# "control" is its median over the MPI alone's, "ctl-spread" its largest
# |control/alone - 1| over rounds (the noise band); --no-control skips it.
#   bench/churn_table.sh [--build DIR] [--mpi ompi|mpich|both] [--np "2 4"]
#                        [--rounds R] [--cycles N] [--load N] [--no-control]
#                        [--kinds "dup split create split_type"] [--parent "no yes warm"]
# --parent: no = world makes no alltoall, yes = one, warm = 300 (measured
# selection decides world's size class first; later communicators of the same
# processes share the decision, docs/tune.md "Shared decisions").
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build mpis="ompi mpich" nps="2 4" rounds=3 cycles=1000 load=0
kinds="dup split create split_type" parents="no yes" control=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --mpi) [ "$2" = both ] && mpis="ompi mpich" || mpis=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --cycles) cycles=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --parent) parents=$2; shift 2 ;;
    --no-control) control=0; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "churn_table.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

busy=()
stop_load() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_load EXIT
for ((i = 0; i < load; i++)); do (while :; do :; done) & busy+=($!); done
[ "$load" -gt 0 ] && sleep 5  # let the load average rise

# One run; prints its median per cycle (us).
run() {  # mpi np vnodes kind parent shim(0|1|control)
  local mpi=$1 np=$2 vn=$3 kind=$4 parent=$5 with=$6 n=$cycles
  # MPICH's own alltoall spins when ranks outnumber cores, and so does Open
  # MPI's beside busy loops (tens of ms per cycle): fewer cycles there.
  if [ "$np" -gt "$(nproc)" ] && { [ "$mpi" = mpich ] || [ "$load" -gt 0 ]; }; then
    n=$((cycles / 20 > 10 ? cycles / 20 : 10))
  fi
  local args=(--cycles "$n" --kind "$kind")
  [ "$parent" = no ] && args+=(--no-parent-call)
  [ "$parent" = warm ] && args+=(--parent-calls 300)
  local bin=$build/bench/comm_churn-$mpi shim=$build/shim/libmlxa2a-$mpi.so
  local out
  local vars=()  # the shim's ranks' environment; the control's calls pass through
  [ "$with" = 0 ] || vars=(LD_PRELOAD="$shim")
  [ "$with" != control ] || vars+=(MLXA2A_TUNE=pmpi)
  if [ "$mpi" = ompi ]; then
    local pre=() v
    for v in "${vars[@]}"; do pre+=(-x "$v"); done
    out=$(MLXA2A_DEBUG_NODE_SIZE=$vn mpirun.openmpi --oversubscribe -x MLXA2A_DEBUG_NODE_SIZE \
          "${pre[@]}" -np "$np" "$bin" "${args[@]}")
  else
    if [ "$with" != 0 ]; then
      out=$(env MLXA2A_DEBUG_NODE_SIZE="$vn" "${vars[@]}" mpiexec.mpich -n "$np" "$bin" "${args[@]}")
    else
      out=$(mpiexec.mpich -n "$np" "$bin" "${args[@]}")
    fi
  fi
  sed -n 's/.*median \([0-9.]*\) us.*/\1/p' <<<"$out"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# spread "A1 A2 .." "C1 C2 ..": the largest |Ci/Ai - 1|.
spread() {
  awk -v a="$1" -v c="$2" 'BEGIN { n = split(a, x, " "); split(c, y, " "); m = 0
    for (i = 1; i <= n; i++) if (x[i] > 0) { d = y[i] / x[i] - 1; if (d < 0) d = -d; if (d > m) m = d }
    printf "%.2f", m }'
}

modes=(0 1)
head="| MPI | np | nodes | kind | parent alltoall | load | MPI alone us | with mlxa2a us | ratio |"
rule="|---|---:|---|---|---|---:|---:|---:|---:|"
if [ "$control" = 1 ]; then
  modes+=(control) head+=" control | ctl-spread |" rule+="---:|---:|"
fi
echo "$head"
echo "$rule"
for mpi in $mpis; do
  for np in $nps; do
    layouts="0"
    [ "$np" -ge 4 ] && layouts="0 2"
    for vn in $layouts; do
      for kind in $kinds; do
        for parent in $parents; do
          la=$(cut -d' ' -f1 /proc/loadavg)
          declare -A got=()
          for ((r = 0; r < rounds; r++)); do
            for ((p = 0; p < ${#modes[@]}; p++)); do  # round r starts r modes further on
              m=${modes[(r + p) % ${#modes[@]}]}
              got[$m]+=" $(run "$mpi" "$np" "$vn" "$kind" "$parent" "$m")"
            done
          done
          a=$(echo "${got[0]}" | median) b=$(echo "${got[1]}" | median)
          nodes=$([ "$vn" = 0 ] && echo 1 || echo "2 virtual")
          printf '| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f |' "$mpi" "$np" "$nodes" \
            "$kind" "$parent" "$la" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')"
          if [ "$control" = 1 ]; then
            c=$(echo "${got[control]}" | median)
            printf ' %.2f | %s |' "$(awk -v a="$a" -v c="$c" 'BEGIN {print c / a}')" "$(spread "${got[0]}" "${got[control]}")"
          fi
          echo
          unset got
        done
      done
    done
  done
done
