#!/usr/bin/env bash
# Communicator churn table (issue 24, item 4): bench/comm_churn with and
# without mlxa2a, alternating, for every kind of communicator, with and
# without a parent alltoall, on one node and on 2 virtual nodes, at the
# machine's load and (--load N) with N busy loops of our own beside it.
# Prints one markdown row per case: medians of each side's per-round medians,
# their ratio, and the 1-minute load average seen at the case's start.
#   bench/churn_table.sh [--build DIR] [--mpi ompi|mpich|both] [--np "2 4"]
#                        [--rounds R] [--cycles N] [--load N]
#                        [--kinds "dup split create split_type"] [--parent "no yes"]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build mpis="ompi mpich" nps="2 4" rounds=3 cycles=1000 load=0
kinds="dup split create split_type" parents="no yes"
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
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
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
run() {  # mpi np vnodes kind parent shim(0|1)
  local mpi=$1 np=$2 vn=$3 kind=$4 parent=$5 with=$6 n=$cycles
  # MPICH's own alltoall spins when ranks outnumber cores, and so does Open
  # MPI's beside busy loops (tens of ms per cycle): fewer cycles there.
  if [ "$np" -gt "$(nproc)" ] && { [ "$mpi" = mpich ] || [ "$load" -gt 0 ]; }; then
    n=$((cycles / 20 > 10 ? cycles / 20 : 10))
  fi
  local args=(--cycles "$n" --kind "$kind")
  [ "$parent" = no ] && args+=(--no-parent-call)
  local bin=$build/bench/comm_churn-$mpi shim=$build/shim/libmlxa2a-$mpi.so
  local out
  if [ "$mpi" = ompi ]; then
    local pre=()
    [ "$with" = 1 ] && pre=(-x LD_PRELOAD="$shim")
    out=$(MLXA2A_DEBUG_NODE_SIZE=$vn mpirun.openmpi --oversubscribe -x MLXA2A_DEBUG_NODE_SIZE \
          "${pre[@]}" -np "$np" "$bin" "${args[@]}")
  else
    if [ "$with" = 1 ]; then
      out=$(MLXA2A_DEBUG_NODE_SIZE=$vn LD_PRELOAD=$shim mpiexec.mpich -n "$np" "$bin" "${args[@]}")
    else
      out=$(mpiexec.mpich -n "$np" "$bin" "${args[@]}")
    fi
  fi
  sed -n 's/.*median \([0-9.]*\) us.*/\1/p' <<<"$out"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "| MPI | np | nodes | kind | parent alltoall | load | MPI alone us | with mlxa2a us | ratio |"
echo "|---|---:|---|---|---|---:|---:|---:|---:|"
for mpi in $mpis; do
  for np in $nps; do
    layouts="0"
    [ "$np" -ge 4 ] && layouts="0 2"
    for vn in $layouts; do
      for kind in $kinds; do
        for parent in $parents; do
          la=$(cut -d' ' -f1 /proc/loadavg)
          without=() with=()
          for ((r = 0; r < rounds; r++)); do
            without+=("$(run "$mpi" "$np" "$vn" "$kind" "$parent" 0)")
            with+=("$(run "$mpi" "$np" "$vn" "$kind" "$parent" 1)")
          done
          a=$(echo "${without[*]}" | median) b=$(echo "${with[*]}" | median)
          nodes=$([ "$vn" = 0 ] && echo 1 || echo "2 virtual")
          printf '| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f |\n' "$mpi" "$np" "$nodes" \
            "$kind" "$parent" "$la" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')"
        done
      done
    done
  done
done
