#!/usr/bin/env bash
# The generated man pages (docs/man/meson.build): mlxa2a(7) has one entry per
# registered switch - every name mlxa2a_info -a --json lists, no other - and
# meson install would put mlxa2a.7, mlxa2a_info.1 and mlxa2a-run.1 in mandir.
# Usage: test_man.sh MLXA2A_INFO MAN_BUILD_DIR BUILD_ROOT
set -uo pipefail
info=$1 dir=$2 root=$3
failures=0
fail() { failures=$((failures + 1)); echo "FAIL $1"; }
pass() { echo "ok   $1"; }

page=$dir/mlxa2a.7
want=$("$info" -a --json | python3 -c 'import json, sys; print("\n".join(sorted(e["name"] for e in json.load(sys.stdin))))')
got=$(awk 'prev == ".TP" && $1 == ".B" { print $2 } { prev = $0 }' "$page" 2>/dev/null | sort)
if [ -n "$want" ] && [ "$got" = "$want" ]; then
  pass "mlxa2a.7 lists all $(wc -l <<<"$want") registered switches"
else
  fail "mlxa2a.7 switch entries differ from the registry: $(diff <(echo "$want") <(echo "$got") | head -n 20)"
fi

for p in mlxa2a.7 mlxa2a_info.1 mlxa2a-tune.1 mlxa2a-run.1; do
  if [ -s "$dir/$p" ] && head -n 1 "$dir/$p" | grep -q '^\.TH ' && grep -q '^\.SH NAME' "$dir/$p"; then
    pass "$p generated"
  else
    fail "$p missing or not a man page"
  fi
done
# The section 1 pages quote the programs' --help: their option lines are there.
grep -q '^  \\-\\-which' "$dir/mlxa2a-run.1" || fail "mlxa2a-run.1 lacks mlxa2a-run --help's --which"
grep -q '\\-\\-json' "$dir/mlxa2a_info.1" || fail "mlxa2a_info.1 lacks mlxa2a_info --help's --json"
grep -q '\\-\\-hostfile' "$dir/mlxa2a-tune.1" || fail "mlxa2a-tune.1 lacks mlxa2a-tune --help's --hostfile"

installed=$(meson introspect --installed "$root" 2>/dev/null)
for p in man7/mlxa2a.7 man1/mlxa2a_info.1 man1/mlxa2a-tune.1 man1/mlxa2a-run.1; do
  if grep -q "/man/$p\"" <<<"$installed"; then pass "meson install puts $p in mandir"
  else fail "meson install does not install $p"; fi
done
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  [ -z "$warnings" ] || fail "groff warns about mlxa2a.7: $warnings"
fi
[ "$failures" = 0 ] || { echo "$failures failed"; exit 1; }
