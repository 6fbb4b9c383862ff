#!/usr/bin/env bash
# MLXA2A_COLL_STATS=json[:path] (docs/stats.md): the job report of real runs,
# validated against the schema and the same run's trace by
# check_stats_json.py.   test_stats_json.sh FAMILY MPIRUN APP  (env: SHIM_DIR)
set -euo pipefail
: "${SHIM_DIR:?}"
fam=$1 mpirun=$2 app=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/expect.sh
. "$(dirname "$0")/expect.sh"
checker="$(dirname "$0")/check_stats_json.py"
export LD_PRELOAD="$SHIM_DIR/libmlxa2a-$fam.so" OMPI_MCA_rmaps_base_oversubscribe=1
export MLXA2A_COLL_TRACE=info
unset MLXA2A_COLL_STATS
fwd=()
[ "$fam" = ompi ] && fwd=(-x LD_PRELOAD -x MLXA2A_COLL_TRACE -x MLXA2A_COLL_STATS -x MLXA2A_LOG_FILE)
cd "$tmp"

# Each rank traces to its own file (lines of several ranks on one stream
# can interleave); NAME.trace holds them all, NAME.out the job's output.
# job NAME CMD...
job() {
  local name=$1
  shift
  if ! env MLXA2A_LOG_FILE="$tmp/$name.%r.log" timeout 300 "$@" >"$tmp/$name.out" 2>&1; then
    fail "$name: the job failed: $(tail -5 "$tmp/$name.out")"
    return 1
  fi
  cat "$tmp/$name".*.log >"$tmp/$name.trace"
}

# run NAME STATS-VALUE NP ARGS...
run() {
  local name=$1 value=$2 np=$3
  shift 3
  job "$name" env MLXA2A_COLL_STATS="$value" "$mpirun" "${fwd[@]}" -np "$np" "$app" "$@"
}

# validate NAME REPORT NP [--expect-tuning]: NAME as given to job.
validate() {
  local name=$1 report=$2
  shift 2
  if [ ! -s "$report" ]; then
    fail "$name: no report at $report: $(grep -E 'stats|warn' "$tmp/$name.trace" | tail -3)"
  elif python3 "$checker" "$report" "$tmp/$name.trace" "$@" >"$tmp/check" 2>&1; then
    pass "$name: $(tail -1 "$tmp/check")"
  else
    fail "$name: $(cat "$tmp/check")"
  fi
}

run quick "json:$tmp/quick.json" 3 --quick && validate quick "$tmp/quick.json" 3
run tuned "json:$tmp/tuned.json" 3 --sizes 64,4096 --repeat 30 &&
  validate tuned "$tmp/tuned.json" 3 --expect-tuning
run default json 2 --quick && validate default "$tmp/mlxa2a-stats.json" 2
expect_match "per-rank lines stay beside the report" '^\[mlxa2a 1:[0-9]+\] coll: stats rdma: ' \
  cat "$tmp/default.trace"
rm -f "$tmp/mlxa2a-stats.json"
run lines y 2 --quick && {
  if [ -e "$tmp/mlxa2a-stats.json" ] || ! grep -q 'coll: stats rdma: ' "$tmp/lines.trace"; then
    fail "MLXA2A_COLL_STATS=y: per-rank lines only, no report"
  else
    pass "MLXA2A_COLL_STATS=y: per-rank lines only, no report"
  fi
}
# Wanted by one rank only (not rank 0): every rank takes part, rank 0 writes
# to the default path.
if job mpmd "$mpirun" "${fwd[@]}" -np 1 "$app" --quick : \
     -np 2 env MLXA2A_COLL_STATS="json:$tmp/ignored.json" "$app" --quick; then
  validate mpmd "$tmp/mlxa2a-stats.json" 3
  [ ! -e "$tmp/ignored.json" ] && pass "mpmd: only rank 0 writes" || fail "mpmd: a rank other than 0 wrote"
fi
# RDMA between 2 virtual nodes of 2 over fakeverbs: path rdma and its counters.
if [ -n "${FAKEVERBS_LIB:-}" ]; then
  mkdir -p "$tmp/fv"
  export MLXA2A_NET_VERBS_LIBRARY="$FAKEVERBS_LIB" FAKEVERBS_QUIET=1 FAKEVERBS_DIR="$tmp/fv" \
    MLXA2A_SHM_SLOT_SIZE=16K MLXA2A_DEBUG_NODE_SIZE=2 MLXA2A_NET_TIMEOUT=20000
  [ "$fam" = ompi ] && fwd+=(-x MLXA2A_NET_VERBS_LIBRARY -x FAKEVERBS_QUIET -x FAKEVERBS_DIR
                             -x MLXA2A_SHM_SLOT_SIZE -x MLXA2A_DEBUG_NODE_SIZE -x MLXA2A_NET_TIMEOUT)
  run rdma "json:$tmp/rdma.json" 4 --quick && validate rdma "$tmp/rdma.json" 4 --expect-rdma
else
  echo "skip rdma: no fakeverbs (built without verbs)"
fi
finish_checks
