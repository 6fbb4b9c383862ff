#!/usr/bin/env bash
# What a build says about itself (issue 28 item 3).
#   test_version.sh info                 mlxa2a_info -V/--version/-c and the
#                                        shims' exported, strings-visible line
#   test_version.sh init FAMILY MPIRUN APP
#                                        that line once per job at
#                                        MLXA2A_LOG_LEVEL=info, never at warn
# Environment: INFO_PROG, SHIM_DIR, FAMILIES ("ompi mpich").
set -euo pipefail
: "${INFO_PROG:?}" "${SHIM_DIR:?}" "${FAMILIES:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/expect.sh
. "$(dirname "$0")/expect.sh"
unset MLXA2A_LIBDIR MLXA2A_CONFIG_FILE
mpi_name() { case "$1" in ompi) echo "Open MPI" ;; mpich) echo "MPICH" ;; esac; }
line_re='mlxa2a [0-9]+\.[0-9]+\.[0-9]+ \(git [^)]+\)'

info_checks() {
  local fam shim
  mkdir -p "$tmp/lone/bin" "$tmp/lib"
  for fam in $FAMILIES; do cp "$SHIM_DIR/libmlxa2a-$fam.so" "$tmp/lib/"; done
  expect_match "-V: version and git describe first" "^$line_re\$" "$INFO_PROG" -V
  expect_match "--version: build configuration" '^build: verbs: .*, (gcc|clang) ' \
    "$INFO_PROG" --version
  for fam in $FAMILIES; do
    shim="$SHIM_DIR/libmlxa2a-$fam.so"
    expect_match "-V: the $fam shim, where it is" "^shim $fam: $shim\$" "$INFO_PROG" -V
    expect_match "-V: the $fam shim's own line" "^    $line_re, built for $(mpi_name "$fam") " \
      "$INFO_PROG" -V
    expect_match "-c: the $fam shim as a comment" "^# shim $fam: $shim\$" "$INFO_PROG" -c
    expect_match "$fam shim exports mlxa2a_build_info" ' R mlxa2a_build_info$' \
      nm -D --defined-only "$shim"
    expect_match "$fam shim: strings shows the line" "^@\\(#\\)$line_re, built for $(mpi_name "$fam")" \
      strings "$shim"
    expect_match "-V: MLXA2A_LIBDIR is searched first" "^shim $fam: $tmp/lib/libmlxa2a-$fam.so\$" \
      env MLXA2A_LIBDIR="$tmp/lib" "$INFO_PROG" -V
  done
  # A copy of mlxa2a_info away from any shim says so.
  cp "$INFO_PROG" "$tmp/lone/bin/"
  expect_match "-V: a shim not found is named with where it was looked for" \
    "^shim [a-z]+: not found \\(searched: $tmp/lone/lib/.*, $tmp/lone/shim\\)" \
    "$tmp/lone/bin/mlxa2a_info" -V
  # -c output is still a valid config file: loading it warns about nothing.
  "$INFO_PROG" -c >"$tmp/conf"
  expect_no_match "-c output loads without warnings" 'warning' \
    sh -c "MLXA2A_CONFIG_FILE='$tmp/conf' '$INFO_PROG' 2>&1 >/dev/null"
  expect_error "-x is still an unknown option" "unknown option '-x'" "$INFO_PROG" -x
}

init_checks() {
  local fam=$1 mpirun=$2 app=$3 shim preload_args=()
  shim="$SHIM_DIR/libmlxa2a-$fam.so"
  if [ "$fam" = ompi ]; then
    preload_args=(-x LD_PRELOAD -x MLXA2A_LOG_LEVEL)
  fi
  for level in info warn; do
    env LD_PRELOAD="$shim" MLXA2A_LOG_LEVEL=$level OMPI_MCA_rmaps_base_oversubscribe=1 \
      timeout 120 "$mpirun" "${preload_args[@]}" -np 2 "$app" --quick >"$tmp/out" 2>&1 || {
        fail "$fam: np 2 run at $level: $(tail -5 "$tmp/out")"; continue; }
    n=$(grep -cE "$line_re, built for $(mpi_name "$fam") " "$tmp/out" || true)
    want=$([ "$level" = info ] && echo 1 || echo 0)
    if [ "$n" = "$want" ]; then
      pass "$fam: build line $want time(s) per job at MLXA2A_LOG_LEVEL=$level"
    else
      fail "$fam: build line $n times at $level: $(grep -E 'mlxa2a' "$tmp/out" | head -5)"
    fi
  done
}

case "${1:-}" in
  info) info_checks ;;
  init) init_checks "$2" "$3" "$4" ;;
  *) echo "usage: $0 info | init FAMILY MPIRUN APP" >&2; exit 2 ;;
esac
finish_checks
