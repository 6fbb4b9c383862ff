#!/usr/bin/env bash
# fakeverbs between two pretend hosts (docs/hosts.md): the stock
# ibv_rc_pingpong, server on h1, client on h0, exchanging QP numbers over the
# cluster's bridge (TCP) and moving data through fakeverbs. It must work with
# the rendezvous directory every host sees (FAKEVERBS_DIR, set by the
# cluster), and must fail when each host keeps it in its private /dev/shm:
# that proves the hosts do not share /dev/shm and that the shared directory
# is what connects them.
# Usage: fakeverbs_across_hosts.sh CLUSTER FAKEVERBS_LIB_DIR
set -euo pipefail
cluster=$1 lib=$2
if ! "$cluster" check; then exit 77; fi
if ! command -v ibv_rc_pingpong >/dev/null; then echo "no ibv_rc_pingpong"; exit 77; fi

# One pingpong; $1 = seconds it may take, the rest = extra env(1) arguments for both sides. Prints the
# client's output; exit status 0 only if both sides succeeded.
pingpong() {
  local port=$((20000 + $$ % 20000)) limit=$1
  shift
  local base=(env LD_LIBRARY_PATH="$lib" FAKEVERBS_QUIET=1 "$@" timeout "$limit"
              ibv_rc_pingpong -d mlx5_0 -g 0 -n 20 -p "$port")
  "$cluster" exec h1 "${base[@]}" > "$PRETEND_CLUSTER/shared/server.out" 2>&1 &
  local server=$!
  sleep 1
  local rc=0
  "$cluster" exec h0 "${base[@]}" h1 2>&1 || rc=$?
  wait "$server" || rc=$?
  cat "$PRETEND_CLUSTER/shared/server.out"
  return $rc
}
export -f pingpong
export cluster lib

"$cluster" run --hosts 2 --expose "$lib" -- bash -c '
  set -u
  out=$(pingpong 20) || { echo "$out"; echo "FAIL: pingpong across hosts through the shared rendezvous directory"; exit 1; }
  echo "$out" | grep -q "20 iters" || { echo "$out"; echo "FAIL: no 20 iterations"; exit 1; }
  echo "pingpong h0 <-> h1 through $FAKEVERBS_DIR: ok"
  if out=$(pingpong 4 FAKEVERBS_DIR= FAKEVERBS_JOB=hosts-test); then
    echo "$out"; echo "FAIL: pingpong worked with each host'"'"'s private /dev/shm as rendezvous"; exit 1
  fi
  echo "with per-host /dev/shm rendezvous it fails, as it must: ok"
  echo PASS'
