#!/usr/bin/env bash
# Every pretend host has its own /tmp, yet a checkout or build tree under /tmp
# (CI clones wherever it likes) must be seen by every host at the same path:
# the caller's working directory and each `--expose PATH` are, the rest of the
# machine's /tmp is not, what a host writes to its /tmp stays there, and
# exec refuses a working directory under /tmp that no host sees. Nothing of
# it (mounts, directories) is left afterwards. The hosts suites, run from a
# clone under /tmp, are the end-to-end form of this test.
# Usage: cluster_paths.sh CLUSTER
set -uo pipefail
cluster=$1
if ! "$cluster" check; then exit 77; fi
fail() { echo "FAIL: $*"; exit 1; }

cwd=$(mktemp -d /tmp/mlxa2a-paths-cwd-XXXXXX)
exposed=$(mktemp -d /tmp/mlxa2a-paths-exposed-XXXXXX)
hidden=$(mktemp -d /tmp/mlxa2a-paths-hidden-XXXXXX)
trap 'rm -rf "$cwd" "$exposed" "$hidden"' EXIT
echo cwd >"$cwd/file"
echo exposed >"$exposed/file"
echo hidden >"$hidden/file"
export cluster cwd exposed hidden

cd "$cwd" || fail "cd $cwd"
"$cluster" run --hosts 2 --expose "$exposed" -- bash -c '
  fail() { echo "FAIL: $*"; exit 1; }
  for h in h0 h1; do
    [ "$("$cluster" exec $h cat "$cwd/file")" = cwd ] || fail "$h does not see the working directory $cwd"
    [ "$("$cluster" exec $h pwd)" = "$cwd" ] || fail "$h does not start in $cwd"
    [ "$("$cluster" exec $h cat "$exposed/file")" = exposed ] || fail "$h does not see --expose $exposed"
    "$cluster" exec $h test ! -e "$hidden" || fail "$h sees $hidden: its /tmp is not its own"
  done
  "$cluster" exec h1 sh -c "echo from-h1 >$exposed/written" || fail "h1 cannot write to $exposed"
  [ "$(cat "$exposed/written")" = from-h1 ] || fail "what h1 wrote to $exposed is not here"
  "$cluster" exec h0 sh -c "echo h0 >/tmp/h0-only" || fail "h0 cannot write to its /tmp"
  "$cluster" exec h1 test ! -e /tmp/h0-only || fail "h1 sees h0s /tmp"
  [ ! -e /tmp/h0-only ] || fail "the machine sees h0s /tmp"
  err=$(cd "$hidden" && "$cluster" exec h0 true 2>&1) && fail "exec from $hidden (not exposed) worked"
  echo "$err" | grep -q "expose it" || fail "exec from $hidden: unclear error: $err"
  echo "hosts see $cwd and $exposed, not $hidden; their /tmp is their own: ok"
' || fail "inside the cluster"
grep -q mlxa2a-paths /proc/self/mountinfo && fail "mounts left: $(grep mlxa2a-paths /proc/self/mountinfo)"
echo PASS
