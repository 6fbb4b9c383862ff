#!/usr/bin/env bash
# A staged install (`meson install --destdir`), then the same tree moved
# elsewhere, runs a real MPI job: the installed mlxa2a-run and mlxa2a_info
# find the shims relative to their own directory (issue 28 item 4).
#   test_install.sh FAMILY MPIRUN APP      (env: MESON, BUILD_ROOT, PREFIX)
set -euo pipefail
: "${MESON:?}" "${BUILD_ROOT:?}" "${PREFIX:?}"
fam=$1 mpirun=$2 app=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/expect.sh
. "$(dirname "$0")/expect.sh"
unset MLXA2A_LIBDIR LD_PRELOAD

"$MESON" install -C "$BUILD_ROOT" --no-rebuild --quiet --destdir "$tmp/stage" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; exit 1; }
staged="$tmp/stage$PREFIX"
shim=$(find "$staged" -name "libmlxa2a-$fam.so" -print -quit)
[ -n "$shim" ] || { echo "FAIL: no libmlxa2a-$fam.so under $staged"; exit 1; }

check_tree() {  # NAME ROOT: the tree at ROOT (a prefix) serves a job
  local name=$1 root=$2 want
  want="${shim/#$staged/$root}"
  expect_out "$name: mlxa2a-run --which finds its own shim" "$want" \
    "$root/bin/mlxa2a-run" --which "$app"
  expect_match "$name: mlxa2a_info -V finds its own shim" "^shim $fam: $want\$" \
    "$root/bin/mlxa2a_info" -V
  env MLXA2A_COLL_TRACE=info timeout 120 "$root/bin/mlxa2a-run" "$mpirun" -np 2 "$app" --quick \
    >"$tmp/run.out" 2>&1 || true
  if [ "$(grep -cE '\] coll: .* path=shm ' "$tmp/run.out")" -ge 2 ] &&
     ! grep -q FAIL "$tmp/run.out"; then
    pass "$name: np 2 job served by the $fam shim (path=shm traced)"
  else
    fail "$name: np 2 job: $(tail -5 "$tmp/run.out")"
  fi
}

check_tree "staged" "$staged"
mv "$staged" "$tmp/moved"
check_tree "moved" "$tmp/moved"
finish_checks
