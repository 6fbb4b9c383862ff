#!/usr/bin/env bash
# scripts/compare.sh --csv/--plot (with its pass-through control and
# --no-control) and --launcher, scripts/hwcheck --launcher, on short runs
# (np=2, sizes 1..4, few iterations, 2 rounds).
# Usage: test_compare.sh BUILD_DIR CASE   (CASE: csv-plot, launcher, hwcheck-launcher)
# The fake launchers are scripts named like the real ones (mlxa2a-run knows
# launchers by name) that log their arguments and start Debian's launchers.
set -uo pipefail
build=$1 case=$2
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
fail() { failures=$((failures + 1)); echo "FAIL $1"; }
pass() { echo "ok   $1"; }
families=()
for f in ompi mpich; do [ -x "$build/bench/osu_alltoall-$f" ] && families+=("$f"); done
[ ${#families[@]} -gt 0 ] || { echo "SKIP: no benchmark built"; exit 77; }
mpi=both
[ ${#families[@]} = 2 ] || mpi=${families[0]}
short=(--np 2 --sizes 1:4 --iters 5 --warmup 1 --rounds 2 --build "$build")

# fake_launcher PATH REAL: PATH logs "$@" to PATH.log, then runs REAL "$@".
fake_launcher() {
  mkdir -p "$(dirname "$1")"
  printf '#!/bin/sh\necho "$*" >>"%s.log"\nexec %s "$@"\n' "$1" "$2" >"$1"
  chmod +x "$1"
}

# The png run has the pass-through control (the default), the svg run
# --no-control.
csv_plot() {
  local fmt ctl
  for fmt in png svg; do
    rm -rf "$tmp/keep" "$tmp/cwd"; mkdir -p "$tmp/cwd"
    ctl=(); [ "$fmt" = png ] || ctl=(--no-control)
    if ! (cd "$tmp/cwd" && "$top/scripts/compare.sh" "${short[@]}" "${ctl[@]+"${ctl[@]}"}" --mpi "$mpi" \
         --csv "$tmp/r.csv" --plot "$tmp/r.$fmt" --keep "$tmp/keep" >"$tmp/out" 2>&1); then
      fail "compare.sh --csv --plot ($fmt): $(tail -n 20 "$tmp/out")"; continue
    fi
    [ -z "$(ls -A "$tmp/cwd")" ] || fail "compare.sh left files in its working directory: $(ls -A "$tmp/cwd")"
    # The plotted ratio is the table's (ratio of the medians), per MPI and size.
    local table plotted
    table=$(awk '/^# mlxa2a vs PMPI: Open MPI/ { f = "ompi" } /^# mlxa2a vs PMPI: MPICH/ { f = "mpich" }
                 /^[0-9]+ / { print f, $1, $4 }' "$tmp/out")
    plotted=$(for f in "${families[@]}"; do awk -v f="$f" '{ printf "%s %s %.2f\n", f, $1, $8 }' "$tmp/keep/$f.plot"; done)
    # Equal to the table's two decimals, give or take the last one: the plot
    # file keeps the ratio to a few digits, so a value at .xx5 may round the
    # other way (seen: 3565.85 in the table, 3565.84 plotted).
    if [ -n "$table" ] && paste -d' ' <(echo "$table") <(echo "$plotted") |
         awk 'NF != 6 || $1 != $4 || $2 != $5 || ($3 - $6 > 0.0101 || $6 - $3 > 0.0101) { bad = 1 }
              END { exit bad }'; then pass "plotted ratios = table ratios"
    else fail "plotted ratios differ: table: $table; plot data: $plotted"; fi
    check_control "$fmt" "${#ctl[@]}"
    # Every (family, mode, round, size) once: 2 or 3 modes x 2 rounds x 3 sizes.
    local nmodes=3 want got
    [ ${#ctl[@]} = 0 ] || nmodes=2
    want=$((nmodes * 6 * ${#families[@]}))
    got=$(awk -F, 'NR > 1 && NF == 6 && $5 ~ /^[0-9.]+$/ && $6 ~ /^[1-3]$/ { k[$1 "," $2 "," $3 "," $4] = 1 }
                   END { print length(k) }' "$tmp/r.csv")
    if [ "$(head -n 1 "$tmp/r.csv")" = "mpi,mode,round,bytes,avg_latency_us,position" ] && [ "$got" = "$want" ] &&
       [ "$(wc -l <"$tmp/r.csv")" = $((want + 1)) ]; then
      pass "csv ($fmt run): $want rows, every round"
    else
      fail "csv ($fmt run): $got distinct of $want wanted: $(cat "$tmp/r.csv")"
    fi
    # The order rotates: round 1 starts without mlxa2a, round 2 with it.
    local first
    first=$(awk -F, '$6 == 1 { print $3 ":" $2 }' "$tmp/r.csv" | sort -u | tr '\n' ' ')
    if [ "$first" = "1:pmpi 2:mlxa2a " ]; then pass "csv ($fmt run): order rotated per round"
    else fail "csv ($fmt run): first runs of the rounds: $first"; fi
    local magic
    magic=$(head -c 200 "$tmp/r.$fmt" | tr -d '\0')
    if [ -s "$tmp/r.$fmt" ] && { [[ $fmt = png && $magic == *PNG* ]] || [[ $fmt = svg && $magic == *"<svg"* ]]; }; then
      pass "plot $fmt produced ($(wc -c <"$tmp/r.$fmt") bytes)"
    else
      fail "plot $fmt: missing, empty or not $fmt"
    fi
  done
  if "$top/scripts/compare.sh" "${short[@]}" --plot "$tmp/r.gif" >/dev/null 2>&1; then
    fail "--plot r.gif accepted"
  else pass "--plot r.gif refused"; fi
}

# check_control FMT NO_CONTROL: the table's control and ctl-spread columns
# (numbers, the control's = the plotted one) are there unless --no-control
# was given, and then neither they nor control runs are.
check_control() {
  local fmt=$1 header table plotted
  header=$(grep -m 1 '^# Size' "$tmp/out")
  if [ "$2" != 0 ]; then
    if [[ $header != *control* ]] && ! grep -q ',control,' "$tmp/r.csv" &&
       [ -z "$(awk '/^[0-9]+ / && NF != 4' "$tmp/out")" ] &&
       ! grep -q '^# control:' "$tmp/out"; then
      pass "--no-control ($fmt run): no control columns, no control runs"
    else fail "--no-control ($fmt run): $(cat "$tmp/out")"; fi
    return
  fi
  table=$(awk '/^# mlxa2a vs PMPI: Open MPI/ { f = "ompi" } /^# mlxa2a vs PMPI: MPICH/ { f = "mpich" }
               /^[0-9]+ / && NF == 6 && $5 ~ /^[0-9]+\.[0-9][0-9]$/ && $6 ~ /^[0-9]+\.[0-9][0-9]$/ { print f, $1, $5 }' "$tmp/out")
  plotted=$(for f in "${families[@]}"; do awk -v f="$f" '{ printf "%s %s %.2f\n", f, $1, $11 }' "$tmp/keep/$f.plot"; done)
  if [[ $header == *" ratio "*" control "*" ctl-spread" ]] && [ "$(wc -l <<<"$table")" = $((3 * ${#families[@]})) ] &&
     [ "$table" = "$plotted" ]; then
    pass "control ($fmt run): control and ctl-spread numeric on every row, control plotted as tabled"
  else fail "control ($fmt run): header: $header; table: $table; plot data: $plotted"; fi
}

# compare.sh through an HPC-X-like mpirun (Open MPI syntax) and an srun.
compare_launcher() {
  local f real log
  for f in "${families[@]}"; do
    real=mpirun.openmpi; [ "$f" = ompi ] || real=mpiexec.mpich
    for l in "$tmp/hpcx-$f/bin/mpirun" "$tmp/slurm-$f/bin/srun"; do
      fake_launcher "$l" "$real"
      log=$l.log
      if ! "$top/scripts/compare.sh" "${short[@]}" --mpi "$f" --launcher "$l" >"$tmp/out" 2>&1; then
        fail "$f --launcher $l: $(tail -n 20 "$tmp/out")"; continue
      fi
      # 2 rounds x (without, with, control): six runs, each "-n 2", the benchmark last.
      if [ "$(grep -c -- "-n 2 .*osu_alltoall-$f -m 1:4" "$log")" = 6 ] &&
         grep -q "^# launcher: $l " "$tmp/out" && grep -q '^4 ' "$tmp/out"; then
        pass "$f: compare.sh --launcher $(basename "$l"): 6 runs through it"
      else
        fail "$f --launcher $l: log: $(cat "$log"); output: $(tail -n 12 "$tmp/out")"
      fi
      # (the launcher's own arguments: what comes before the benchmark)
      if [[ $l == */srun ]] && sed 's| [^ ]*/osu_alltoall-.*||' "$log" | grep -qE -- '(^| )(-x|--oversubscribe)( |$)'; then
        fail "$f srun got Open MPI options: $(cat "$log")"
      fi
    done
  done
  if "$top/scripts/compare.sh" "${short[@]}" --mpi "${families[0]}" --launcher "$tmp/none/mpirun" >"$tmp/out" 2>&1; then
    fail "a missing --launcher was accepted"
  elif grep -q "launcher $tmp/none/mpirun not found" "$tmp/out"; then pass "missing --launcher named"
  else fail "missing --launcher: $(cat "$tmp/out")"; fi
}

# hwcheck --fake through a fake Open MPI mpirun: devices need no launcher in
# --fake mode; the rdma-counts program and compare.sh's runs go through it.
hwcheck_launcher() {
  local f=${families[0]} real=mpirun.openmpi l
  [ "$f" = ompi ] || real=mpiexec.mpich
  l="$tmp/spack/bin/mpirun"
  fake_launcher "$l" "$real"
  if ! "$top/scripts/hwcheck" --fake --mpi "$f" --rounds 1 --sizes 1:4 --build "$build" \
       --checks rdma-counts,osu --report "$tmp/report" --launcher "$l" >"$tmp/out" 2>&1; then
    fail "hwcheck --launcher: $(tail -n 20 "$tmp/out")"; return
  fi
  if [ "$(grep -c 'a2a_rdma' "$l.log")" = 1 ] && [ "$(grep -c osu_alltoall "$l.log")" = 2 ] &&
     grep -q '^RESULT PASS' "$tmp/out"; then
    pass "hwcheck --launcher: rdma-counts and osu runs through it"
  else
    fail "hwcheck --launcher: log: $(cat "$l.log"); output: $(tail -n 12 "$tmp/out")"
  fi
}

case "$case" in
  csv-plot) command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed (scripts/setup.sh)"; exit 77; }; csv_plot ;;
  launcher) compare_launcher ;;
  hwcheck-launcher) hwcheck_launcher ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
[ "$failures" = 0 ] || { echo "$failures failed"; exit 1; }
