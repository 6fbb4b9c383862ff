#!/usr/bin/env bash
# bench/osu_alltoall keeps OSU 7.4's option letters: -z[P,..] tail-latency
# columns, -T TYPE the datatype; our thread-CPU report moved to -C.
# Usage: test_osu_options.sh LAUNCHER BENCHMARK (runs np=2, tiny sizes).
set -uo pipefail
launcher=$1 bench=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
fail() { failures=$((failures + 1)); echo "FAIL $1"; }
pass() { echo "ok   $1"; }
run() { timeout 120 "$launcher" -np 2 "$bench" -i 20 -x 2 "$@" 2>&1; }

# Every data row must have exactly WANT fields, all numeric.
rows_have() {
  awk -v want="$1" '/^[0-9]/ { n++; if (NF != want) bad++; for (i = 1; i <= NF; i++) if ($i !~ /^[0-9.]+$/) bad++ }
                     END { exit !(n > 0 && bad == 0) }'
}

out=$(run -m 1:8 -z)
if grep -q 'P50 Tail Lat(us) *P90 Tail Lat(us) *P99 Tail Lat(us)$' <<<"$out" && rows_have 5 <<<"$out"; then
  pass "-z: P50 P90 P99 columns"
else fail "-z: $out"; fi

out=$(run -m 4:4 -f -z25,75)
if grep -q 'Iterations *P25 Tail Lat(us) *P75 Tail Lat(us)$' <<<"$out" && rows_have 7 <<<"$out"; then
  pass "-z25,75 after -f's columns"
else fail "-z25,75: $out"; fi

out=$(run -m 1:8 -T mpi_int)
if grep -q '^# Datatype: MPI_INT\.' <<<"$out" && [ "$(awk '/^[0-9]/ {printf "%s ", $1}' <<<"$out")" = "4 8 " ] &&
   ! grep -q thread-cpu <<<"$out"; then
  pass "-T mpi_int: sizes of whole ints, no thread-cpu lines"
else fail "-T mpi_int: $out"; fi

out=$(run -m 2:2 -C)
if grep -q '^# thread-cpu 2 44 [0-9]' <<<"$out"; then pass "-C: thread-cpu line"; else fail "-C: $out"; fi

out=$(run -T mpi_double); rc=$?
if [ "$rc" != 0 ] && grep -q 'Invalid Datatype \[-T mpi_double\]' <<<"$out"; then
  pass "-T mpi_double refused"
else fail "-T mpi_double: exit $rc: $out"; fi

out=$(run -m 1:1 -z0); rc=$?
if [ "$rc" != 0 ]; then pass "-z0 refused"; else fail "-z0 accepted: $out"; fi

[ "$failures" = 0 ] || { echo "$failures failed"; exit 1; }
