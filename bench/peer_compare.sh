#!/usr/bin/env bash
# Alternates bench/peer_compare runs without and with mlxa2a on pretend hosts
# (scripts/cluster, root) and prints, per size, the medians over the runs of
#   the MPI's own MPI_Alltoall | mlxa2a's | MPI Advance's best | ratios
# where MPI Advance's best is the smallest of its node-aware algorithms'
# medians in the runs with mlxa2a, timed in the same process alternating with
# mlxa2a's (it does not call MPI_Alltoall, so the shim leaves it as it is).
# Each round also runs a control, the shim with MLXA2A_TUNE=pmpi (every call
# passes through to PMPI_Alltoall; --no-control skips it), the run order
# rotating per round: ctl_vs_mpi is its median over the MPI's, ctl_spread
# its largest |control/MPI - 1| over the runs, the noise band vs_mpi must
# leave. vs_mpiadv has no control: it compares two algorithms in one process.
#
# Usage: bench/peer_compare.sh --hosts 2,2 --mpi ompi|mpich --mpiadv LIB
#          [--runs N] [--sizes MIN:MAX] [--iters N] [--rounds R]
#          [--env VAR=VAL]... [--build DIR] [--shim LIB] [--keep DIR] [--no-control]
#          [--algos mpi,node_aware_pairwise,...]   (peer_compare -a)
# --env goes to the runs with mlxa2a only (default MLXA2A_TUNE=shm: the engine
# forced). MPI Advance is built outside this repository (bench/results/
# multi-node.md says how); LIB is its liblocality_aware.so for that MPI.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
hosts="" fam="" lib="" shim="" algos="" runs=3 sizes=1:65536 iters=200 rounds=5 keep="" env=() control=1
build=${BUILD_DIR:-$top/build}
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2 ;; --mpi) fam=$2 ;; --mpiadv) lib=$2 ;; --runs) runs=$2 ;;
    --sizes) sizes=$2 ;; --iters) iters=$2 ;; --rounds) rounds=$2 ;; --build) build=$2 ;;
    --keep) keep=$2 ;; --env) env+=("$2") ;; --shim) shim=$2 ;; --algos) algos=$2 ;;
    --no-control) control=0; shift; continue ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "peer_compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
[ -n "$hosts" ] && [ -n "$fam" ] && [ -n "$lib" ] || {
  echo "peer_compare.sh: --hosts, --mpi and --mpiadv are required" >&2; exit 2; }
[ ${#env[@]} -gt 0 ] || env=(MLXA2A_TUNE=shm)
bench=$build/bench/peer_compare-$fam
shim=${shim:-$build/shim/libmlxa2a-$fam.so}
[ -x "$bench" ] && [ -f "$shim" ] || { echo "peer_compare.sh: build $bench first" >&2; exit 1; }
[ -f "$lib" ] || { echo "peer_compare.sh: no $lib" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=${keep:-$(mktemp -d)}
mkdir -p "$out"
nhosts=$(tr ',' '\n' <<<"$hosts" | wc -l)
state=$("$top/scripts/cluster" up --hosts "$nhosts" --watch $$ --expose "$build" \
        --expose "$(dirname "$shim")" \
        --expose "$(dirname "$lib")" --expose "$out")
trap '"$top/scripts/cluster" down "$state"; [ -n "$keep" ] || rm -rf "$out"' EXIT

echo "# peer_compare.sh: hosts $hosts, $fam, $runs runs each way, load $(cut -d' ' -f1-3 /proc/loadavg)"
modes=(without with)
[ "$control" = 0 ] || modes+=(control)
for r in $(seq 1 "$runs"); do
  for ((p = 0; p < ${#modes[@]}; p++)); do  # run r starts r - 1 modes further on
    mode=${modes[(r - 1 + p) % ${#modes[@]}]}
    cmd=("$top/scripts/cluster" launch --state "$state" --family "$fam" --ranks "$hosts"
         --timeout 900)
    [ "$fam" = ompi ] || cmd+=(--done-pattern "^${sizes#*:} " --done-count 1 --finalize-grace 5)
    if [ "$mode" != without ]; then
      cmd+=(--env "LD_PRELOAD=$shim")
      for kv in "${env[@]}"; do
        [ "$mode" = control ] && [[ $kv == MLXA2A_TUNE=* ]] || cmd+=(--env "$kv")
      done
      [ "$mode" != control ] || cmd+=(--env MLXA2A_TUNE=pmpi)
    fi
    cmd+=(-- "$bench" -m "$sizes" -i "$iters" -x 20 -r "$rounds" --mpiadv "$lib")
    [ -z "$algos" ] || cmd+=(-a "$algos")
    "${cmd[@]}" >"$out/$mode-$r.out" 2>"$out/$mode-$r.err" || {
      echo "peer_compare.sh: run $mode $r failed:" >&2; tail -20 "$out/$mode-$r.err" >&2; exit 1; }
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Columns of the driver: size mpi <mpiadv algorithms...> mpiadv_best. The
# ratio to MPI Advance is taken within each run with mlxa2a (same process,
# alternating), the ratio to the MPI across the alternating runs.
files=("$out"/without-*.out "$out"/with-*.out)
[ "$control" = 0 ] || files+=("$out"/control-*.out)
awk -v control="$control" '
  FNR == 1 { mode = FILENAME; sub(/.*\//, "", mode); run = mode; sub(/-.*/, "", mode); gsub(/[^0-9]/, "", run) }
  /^[0-9]/ { k = $1; sizes[k] = 1
             if (mode == "with") { us[k] = us[k] " " $2; adv[k] = adv[k] " " $NF; rat[k] = rat[k] " " $2 / $NF }
             else if (mode == "control") { ctl[k] = ctl[k] " " $2; ctl_run[k, run] = $2 }
             else { own[k] = own[k] " " $2; own_run[k, run] = $2 } }
  function spread(k,   r, d, m) { m = 0
    for (r = 1; (k, r) in own_run; r++) if ((k, r) in ctl_run && own_run[k, r] > 0) {
      d = ctl_run[k, r] / own_run[k, r] - 1; if (d < 0) d = -d; if (d > m) m = d }
    return m }
  function med(s,   a, n, i, j, t) { n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END { printf "%-8s %12s %12s %12s %10s %10s", "# size", "mpi_us", "mlxa2a_us", "mpiadv_us", "vs_mpi", "vs_mpiadv"
        if (control) printf " %10s %10s", "ctl_vs_mpi", "ctl_spread"
        printf "\n"
        n = 0; for (k in sizes) keys[++n] = k + 0
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (keys[j] < keys[i]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
        for (i = 1; i <= n; i++) { k = keys[i]; m = med(own[k]); u = med(us[k])
          printf "%-8d %12.2f %12.2f %12.2f %10.2f %10.2f", k, m, u, med(adv[k]), u / m, med(rat[k])
          if (control) printf " %10.2f %10.2f", med(ctl[k]) / m, spread(k)
          printf "\n" } }
' "${files[@]}"
