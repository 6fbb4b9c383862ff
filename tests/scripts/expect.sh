# Sourced by the shell tests of tests/scripts: pass/fail bookkeeping and the
# expect_* checks. The caller sets tmp (a scratch directory) first and ends
# with finish_checks, whose status is the test's.
# shellcheck shell=bash
: "${tmp:?set tmp before sourcing expect.sh}"

failures=0
checks=0
pass() { checks=$((checks + 1)); echo "ok   $1"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $1"; }

# expect_out NAME EXPECTED-STDOUT CMD...: exit 0 and exactly that output.
expect_out() {
  local name=$1 want=$2 got rc=0
  shift 2
  got=$("$@" 2>"$tmp/err") || rc=$?
  if [ "$rc" = 0 ] && [ "$got" = "$want" ]; then
    pass "$name"
  else
    fail "$name: exit $rc, stdout '$got' (wanted '$want'), stderr: $(cat "$tmp/err")"
  fi
}

# expect_error NAME STDERR-REGEX CMD...: non-zero exit, message matches.
expect_error() {
  local name=$1 pattern=$2 rc=0
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" != 0 ] && grep -qE -- "$pattern" "$tmp/err"; then
    pass "$name"
  else
    fail "$name: exit $rc, stderr '$(cat "$tmp/err")' (wanted /$pattern/)"
  fi
}

# expect_match NAME STDOUT-REGEX CMD...: exit 0, stdout matches.
expect_match() {
  local name=$1 pattern=$2 rc=0
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" = 0 ] && grep -qE -- "$pattern" "$tmp/out"; then
    pass "$name"
  else
    fail "$name: exit $rc, stdout '$(cat "$tmp/out")' stderr '$(cat "$tmp/err")' (wanted /$pattern/)"
  fi
}

# expect_no_match NAME STDOUT-REGEX CMD...: exit 0, stdout does not match.
expect_no_match() {
  local name=$1 pattern=$2 rc=0
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" = 0 ] && ! grep -qE -- "$pattern" "$tmp/out"; then
    pass "$name"
  else
    fail "$name: exit $rc, stdout '$(cat "$tmp/out")' stderr '$(cat "$tmp/err")' (wanted no /$pattern/)"
  fi
}

finish_checks() {
  echo "$((checks - failures))/$checks checks passed"
  [ "$failures" = 0 ]
}
