#!/usr/bin/env bash
# scripts/hwcheck --fake end to end (docs/hwcheck.md "Tests"), each report
# checked against the documented schema (check_hwcheck_json.py):
#   all checks   Open MPI: every check but a2a-check (the mpi suites run that
#                program at length) and osu (hwcheck-launcher runs it), on 2
#                pretend hosts of 2 ranks (scripts/cluster, as root; else on
#                2 virtual nodes, said so); MPICH: rdma-counts and fault on
#                virtual nodes. Verdict PASS, exit 0, each family's leaders
#                in the report (on hosts: on both hosts).
#   leftover     the killed rank leaves a /dev/shm/mlxa2a-* segment
#                (A2A_LEAVE_SEGMENT=1, tests/mpi/a2a_rdma.cc): the fault
#                check must find it and fail, the verdict must be FAIL, the
#                exit status 1, and the segment must be gone afterwards.
# Usage: test_hwcheck.sh BUILD_DIR
set -uo pipefail
build=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
checker=$top/tests/scripts/check_hwcheck_json.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
# Checks left out of CI (--skip), comma-separated; none since skew (a rank
# later than MLXA2A_NET_TIMEOUT must not fail the call) passes (issue 37).
ci_skip=""
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
[ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

families=()
for f in ompi mpich; do [ -x "$build/tests/mpi/a2a_rdma-$f" ] && families+=("$f"); done
[ ${#families[@]} -gt 0 ] || { echo "SKIP: no MPI test programs built"; exit 77; }

cluster=$top/scripts/cluster
on_hosts=0
if "$cluster" check 2>"$tmp/why"; then on_hosts=1; else echo "     (no pretend hosts: $(cat "$tmp/why"); Open MPI on virtual nodes)"; fi
printf 'h0\nh1\n' >"$tmp/hosts"

# On h0 of a pretend cluster of 2, Open MPI told how to reach h1 (docs/hosts.md).
on_cluster() {
  local expose=(--expose "$tmp")
  [[ $build != /tmp/* ]] || expose+=(--expose "$build")
  # shellcheck disable=SC2016  # expanded inside the cluster's command
  "$cluster" run --hosts 2 "${expose[@]}" -- bash -c 'exec "$0" exec h0 env \
    OMPI_MCA_plm_rsh_agent="$PRETEND_CLUSTER/ssh" OMPI_MCA_btl=self,vader,tcp \
    OMPI_MCA_btl_tcp_if_include=169.254.0.0/16 OMPI_MCA_oob_tcp_if_include=169.254.0.0/16 \
    OMPI_MCA_mpi_yield_when_idle=1 "$@"' "$cluster" "$@"
}

# run NAME EXPECTED_EXIT HWCHECK_ARGS...: one hwcheck run, its report in
# $tmp/NAME.json; with ON_HOSTS=1 in the environment, on the pretend cluster.
run() {
  local name=$1 want=$2 rc=0 t0=$SECONDS pre=(); shift 2
  [ "${ON_HOSTS:-0}" = 0 ] || pre=(on_cluster)
  "${pre[@]}" "$top/scripts/hwcheck" --fake --build "$build" --report "$tmp/$name" "$@" >"$tmp/$name.out" 2>&1 || rc=$?
  echo "     ($name: $((SECONDS - t0)) s)"
  if [ "$rc" != "$want" ]; then
    fail "$name: exit $rc, wanted $want: $(tail -n 25 "$tmp/$name.out")"; return 1
  fi
}

for f in "${families[@]}"; do
  hosts=0 where=()
  if [ "$f" = ompi ]; then
    checks=rdma-counts,sizes,leaders,zcopy,fork,threads,split-churn,skew,fault
    hosts=$on_hosts
    [ "$hosts" = 0 ] || where=(--hostfile "$tmp/hosts" --keep "$tmp/keep-$f")
  else
    checks=rdma-counts,fault
  fi
  skip=() expected=$checks
  if [ -n "$ci_skip" ]; then
    skip=(--skip "$ci_skip")
    expected=$(tr , '\n' <<<"$checks" | grep -vxF -f <(tr , '\n' <<<"$ci_skip") | paste -sd, -)
  fi
  if ON_HOSTS=$hosts run "all-$f" 0 --mpi "$f" --checks "$checks" "${skip[@]}" --rounds 1 "${where[@]}"; then
    leaders_on=""
    [ "$hosts" = 0 ] || leaders_on="--expect-leaders-on h0,h1"
    # shellcheck disable=SC2086  # leaders_on: no words or two
    if out=$(python3 "$checker" "$tmp/all-$f.json" --verdict PASS --expect-leaders $leaders_on \
             --expect-checks "devices,$expected"); then
      pass "$f$([ "$hosts" = 0 ] || echo " on pretend hosts h0, h1"): every check passed, report valid: $out"
    else
      fail "$f: report: $out"
    fi
    if ! grep -q '^RESULT PASS' "$tmp/all-$f.out" || ! grep -q '^leaders (what mlxa2a chose' "$tmp/all-$f.txt"; then
      fail "$f: no RESULT PASS or no leaders table: $(cat "$tmp/all-$f.txt")"
    fi
  fi
done

f=${families[0]}
before=$(find /dev/shm -maxdepth 1 -name 'mlxa2a-*-hwcheck-leftover' 2>/dev/null | wc -l)
if A2A_LEAVE_SEGMENT=1 run leftover 1 --mpi "$f" --checks fault; then
  if out=$(python3 "$checker" "$tmp/leftover.json" --verdict FAIL --expect-fail fault); then
    pass "leftover: the fault check failed the verdict and the exit status: $out"
  else
    fail "leftover: report: $out"
  fi
  grep -q 'left behind (segments now removed): .*hwcheck-leftover' "$tmp/leftover.txt" ||
    fail "leftover: not named in the table: $(cat "$tmp/leftover.txt")"
fi
after=$(find /dev/shm -maxdepth 1 -name 'mlxa2a-*-hwcheck-leftover' 2>/dev/null | wc -l)
if [ "$after" -le "$before" ]; then pass "leftover: removed"; else fail "leftover: still in /dev/shm"; fi

[ "$failures" = 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
