#!/usr/bin/env bash
# Tests scripts/mlxa2a-run against small programs that need Open MPI, MPICH,
# MPI only through another library, both, or no MPI (tests/scripts/meson.build
# builds them and passes their paths in the environment). A family that is not
# installed has its cases skipped. Shims are stand-ins (fake_shim.c) copied to
# a temporary libdir under the real names.
set -euo pipefail

: "${MLXA2A_RUN:?path of the configured mlxa2a-run}"
: "${FAKE_SHIM:?}" "${FAKE_APP_PLAIN:?}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libdir="$tmp/lib"
mkdir -p "$libdir" "$tmp/empty"
cp "$FAKE_SHIM" "$libdir/libmlxa2a-ompi.so"
cp "$FAKE_SHIM" "$libdir/libmlxa2a-mpich.so"
# Tests must not find an installed or built real shim behind the fake ones.
isolated="$tmp/bin/mlxa2a-run"
mkdir -p "$tmp/bin"
sed "s|^install_libdir=.*|install_libdir='$tmp/no-such-libdir'|" "$MLXA2A_RUN" >"$isolated"
chmod +x "$isolated"
export MLXA2A_LIBDIR="$libdir"
unset LD_PRELOAD

# shellcheck source=tests/scripts/expect.sh
. "$(dirname "$0")/expect.sh"

run=("$isolated")

# --- usage and errors that need no MPI ------------------------------------
expect_match "--help" 'Usage: mlxa2a-run' "${run[@]}" --help
expect_error "no command" 'no command given' "${run[@]}"
expect_error "unknown option" "unknown option '--bogus'" "${run[@]}" --bogus ./x
expect_error "non-MPI binary" 'does not use a known MPI' "${run[@]}" --which "$FAKE_APP_PLAIN"
expect_error "non-MPI binary under a launcher" 'does not use a known MPI' \
  "${run[@]}" --which mpirun -np 2 "$FAKE_APP_PLAIN"
expect_error "no ELF in the command" 'no ELF executable found' \
  "${run[@]}" --which mpirun -np 2 "$tmp/missing-app"
echo '#!/bin/sh' >"$tmp/wrapper.sh"
chmod +x "$tmp/wrapper.sh"
expect_error "script is not an ELF" 'no ELF executable found' \
  "${run[@]}" --which "$tmp/wrapper.sh"
expect_error "--app that is not ELF" 'not an ELF executable' \
  "${run[@]}" --which --app "$tmp/wrapper.sh"

if [ -n "${FAKE_APP_BOTH:-}" ]; then
  expect_error "both MPIs" 'links both Open MPI .* and MPICH' "${run[@]}" --which "$FAKE_APP_BOTH"
else
  echo "skip both MPIs: only one MPI family built"
fi

# --- per family -------------------------------------------------------------
family_cases() {
  local fam=$1 app=$2 indirect=$3 launcher=$4 shim
  shim="$libdir/libmlxa2a-$fam.so"

  expect_out "$fam: --which on the binary" "$shim" "${run[@]}" --which "$app"
  expect_out "$fam: --which, MPI through another library (ldd)" "$shim" \
    "${run[@]}" --which "$indirect"
  expect_out "$fam: --which through mpirun and its options" "$shim" \
    "${run[@]}" --which mpirun -np 2 -x FOO --map-by core --mca btl self "$app" -x y
  expect_out "$fam: --which through mpiexec -genv" "$shim" \
    "${run[@]}" --which mpiexec -n 2 -genv A B "$app"
  expect_out "$fam: --app names the binary" "$shim" \
    "${run[@]}" --which --app "$app" mpirun -np 2 "$tmp/wrapper.sh"
  expect_out "$fam: --app alone" "$shim" "${run[@]}" --which --app "$app"
  expect_out "$fam: app found in PATH" "$shim" \
    env PATH="$(dirname "$app"):$PATH" "$isolated" --which "$(basename "$app")"

  # Search order: MLXA2A_LIBDIR, then the libdir/build tree.
  expect_error "$fam: shim missing" "libmlxa2a-$fam.so .*not found; looked in: $tmp/empty" \
    env MLXA2A_LIBDIR="$tmp/empty" "$isolated" --which "$app"
  mkdir -p "$tmp/tree/scripts" "$tmp/tree/shim"
  cp "$isolated" "$tmp/tree/scripts/"
  cp "$FAKE_SHIM" "$tmp/tree/shim/libmlxa2a-$fam.so"
  expect_out "$fam: build tree ../shim" "$tmp/tree/shim/libmlxa2a-$fam.so" \
    env -u MLXA2A_LIBDIR "$tmp/tree/scripts/mlxa2a-run" --which "$app"
  expect_out "$fam: MLXA2A_LIBDIR before the build tree" "$shim" \
    "$tmp/tree/scripts/mlxa2a-run" --which "$app"
  rm -rf "$tmp/tree"

  # Environment: prepended to LD_PRELOAD, and the shim really loads.
  expect_out "$fam: runs the app preloaded" "preload=$shim shim=loaded" "${run[@]}" "$app"
  expect_out "$fam: prepends to LD_PRELOAD" "preload=$shim:$FAKE_SHIM shim=loaded" \
    env LD_PRELOAD="$FAKE_SHIM" "$isolated" "$app"
  expect_match "$fam: dry run, Open MPI launcher gets -x LD_PRELOAD" \
    "^LD_PRELOAD=$shim mpirun\\.openmpi -x LD_PRELOAD -np 2 " \
    "${run[@]}" --dry-run mpirun.openmpi -np 2 "$app"
  expect_match "$fam: dry run, hydra gets the environment only" \
    "^LD_PRELOAD=$shim mpiexec\\.mpich -n 2 " \
    "${run[@]}" --dry-run mpiexec.mpich -n 2 "$app"
  if [ -n "$launcher" ]; then
    expect_out "$fam: through $(basename "$launcher") -n 1" "preload=$shim shim=loaded" \
      timeout 60 "$isolated" "$launcher" -n 1 "$app"
  else
    echo "skip $fam: no launcher installed"
  fi
}

ran=0
if [ -n "${FAKE_APP_OMPI:-}" ]; then
  family_cases ompi "$FAKE_APP_OMPI" "$FAKE_APP_INDIRECT_OMPI" "${LAUNCHER_OMPI:-}"
  ran=1
fi
if [ -n "${FAKE_APP_MPICH:-}" ]; then
  family_cases mpich "$FAKE_APP_MPICH" "$FAKE_APP_INDIRECT_MPICH" "${LAUNCHER_MPICH:-}"
  ran=1
fi
[ "$ran" = 1 ] || echo "skip per-family cases: no MPI family built"

finish_checks
