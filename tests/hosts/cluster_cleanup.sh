#!/usr/bin/env bash
# scripts/cluster leaves nothing behind: after `down`, and after the process
# it watches dies by SIGKILL (a test runner killed mid-run), no holder, no
# process started on a host, no state directory and no network interface of
# this machine's is left. Usage: cluster_cleanup.sh CLUSTER
set -uo pipefail
cluster=$1
if ! "$cluster" check; then exit 77; fi
fail() { echo "FAIL: $*"; exit 1; }
links_before=$(ip -o link | wc -l)

# gone PID... : true once none of the PIDs exists (waits up to 10 s).
gone() {
  for _ in $(seq 100); do
    local alive=0
    for p in "$@"; do [ -e "/proc/$p" ] && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  return 1
}
holders() { python3 -c 'import json,sys; i=json.load(open(sys.argv[1]+"/cluster.json")); print(*[h["pid"] for h in i["hosts"]], i["switch"])' "$1"; }

for how in down watched-process-killed; do
  sleep 60 & watched=$!
  state=$("$cluster" up --hosts 2 --watch "$watched") || fail "up"
  pids=$(holders "$state")
  "$cluster" exec --state "$state" h1 sleep 300 & on_host=$!
  "$cluster" exec --state "$state" h0 sh -c 'sleep 300 & sleep 300' & on_host2=$!
  # Started on the hosts = in another network namespace (nsenter execs).
  own=$(readlink /proc/self/ns/net)
  for _ in $(seq 100); do
    grandchild=$(pgrep -P "$on_host2" sleep | head -1)
    [ -n "$grandchild" ] && [ "$(readlink "/proc/$on_host/ns/net")" != "$own" ] && break
    sleep 0.1
  done
  [ -n "$grandchild" ] || fail "the processes on h0 did not start"
  [ "$(readlink "/proc/$on_host/ns/net")" != "$own" ] || fail "the process on h1 did not start"
  if [ "$how" = down ]; then
    "$cluster" down "$state"
  else
    kill -9 "$watched"
  fi
  # shellcheck disable=SC2086
  gone $pids "$on_host" "$on_host2" $grandchild || fail "$how: processes left: $(ps -o pid,args -p "$(echo $pids $on_host $on_host2 $grandchild | tr ' ' ,)")"
  for _ in $(seq 50); do [ -e "$state" ] || break; sleep 0.1; done
  [ ! -e "$state" ] || fail "$how: $state left"
  [ "$(ip -o link | wc -l)" = "$links_before" ] || fail "$how: network interfaces changed"
  kill "$watched" 2>/dev/null
  wait 2>/dev/null  # (the shell reports its killed jobs)
  echo "$how: nothing left"
done
echo PASS
