#!/usr/bin/env bash
# Configures and builds mlxa2a into ${BUILD_DIR:-build}. Extra arguments go to
# `meson setup` (for example -Dmpi=mpich). Warnings are errors.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$top" -Dwerror=true "$@"
elif [ $# -gt 0 ]; then
  meson configure "$build" "$@"
fi
ninja -C "$build"
