#!/usr/bin/env bash
# Tests mlxa2a-run with interpreters, an explicit --mpi, and Slurm's srun:
# * Python: the MPI comes from mpi4py's MPI extension module. A fake mpi4py
#   package (its MPI module is a library linking Open MPI or MPICH) checks the
#   detection for both families; Debian's python3-mpi4py (an Open MPI build)
#   runs a real alltoall through the real shim when it is installed.
# * srun: a fake srun (fake_srun.sh) that applies --export as Slurm does.
set -euo pipefail

: "${MLXA2A_RUN:?path of the configured mlxa2a-run}"
: "${FAKE_SHIM:?}" "${FAKE_SRUN:?}" "${MPI4PY_APP:?}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libdir="$tmp/lib"
mkdir -p "$libdir" "$tmp/bin" "$tmp/slurm"
cp "$FAKE_SHIM" "$libdir/libmlxa2a-ompi.so"
cp "$FAKE_SHIM" "$libdir/libmlxa2a-mpich.so"
isolated="$tmp/bin/mlxa2a-run"
sed -e "s|^install_libdir=.*|install_libdir='$tmp/no-such-libdir'|" \
    -e "s|^libdir_from_bindir=.*|libdir_from_bindir='$tmp/no-such-libdir'|" \
    "$MLXA2A_RUN" >"$isolated"
chmod +x "$isolated"
cp "$FAKE_SRUN" "$tmp/slurm/srun"
export MLXA2A_LIBDIR="$libdir"
unset LD_PRELOAD SLURM_EXPORT_ENV MLXA2A_RUN  # (not a switch: the shim would warn)

# shellcheck source=tests/scripts/expect.sh
. "$(dirname "$0")/expect.sh"

# An ELF Python interpreter (a pyenv shim is a shell script).
py=$(readlink -f /usr/bin/python3 2>/dev/null || true)
[ -x "$py" ] || py=$(readlink -f "$(type -P python3)")

# --- --mpi -------------------------------------------------------------------
echo '#!/bin/sh' >"$tmp/wrapper.sh"
chmod +x "$tmp/wrapper.sh"
for fam in ompi mpich; do
  expect_out "--mpi $fam, no command" "$libdir/libmlxa2a-$fam.so" "$isolated" --which --mpi "$fam"
  expect_out "--mpi=$fam through a launcher and a script" "$libdir/libmlxa2a-$fam.so" \
    "$isolated" --which --mpi="$fam" mpiexec -n 2 "$tmp/wrapper.sh"
done
expect_error "--mpi with a bad family" "--mpi openmpi: expected ompi or mpich" \
  "$isolated" --which --mpi openmpi ./x
expect_error "a script without --mpi says --mpi works" 'no ELF executable found.*--mpi ompi.mpich' \
  "$isolated" --which mpiexec -n 2 "$tmp/wrapper.sh"

# --- Python --------------------------------------------------------------------
mkdir -p "$tmp/py-none/mpi4py"
touch "$tmp/py-none/mpi4py/__init__.py"
expect_error "python3 without mpi4py.MPI" 'Python interpreter without mpi4py' \
  env PYTHONPATH="$tmp/py-none" "$isolated" --which mpirun -np 2 "$py" app.py
for fam in ompi mpich; do
  var=FAKE_MPI_LIB_${fam^^}
  if [ -z "${!var:-}" ]; then echo "skip python $fam: family not built"; continue; fi
  mkdir -p "$tmp/py-$fam/mpi4py"
  touch "$tmp/py-$fam/mpi4py/__init__.py"
  cp "${!var}" "$tmp/py-$fam/mpi4py/MPI.so"
  expect_out "$fam: python3 app.py under mpirun (mpi4py's DT_NEEDED)" "$libdir/libmlxa2a-$fam.so" \
    env PYTHONPATH="$tmp/py-$fam" "$isolated" --which mpirun -np 2 "$py" app.py
  expect_out "$fam: bare python3 -m mpi4py app.py" "$libdir/libmlxa2a-$fam.so" \
    env PYTHONPATH="$tmp/py-$fam" "$isolated" --which "$py" -m mpi4py app.py
  # A pyenv/virtualenv-style shim script named python3, found in PATH.
  mkdir -p "$tmp/shims"
  printf '#!/bin/sh\nexec %s "$@"\n' "$py" >"$tmp/shims/python3"
  chmod +x "$tmp/shims/python3"
  expect_out "$fam: python3 that is a shim script" "$libdir/libmlxa2a-$fam.so" \
    env PATH="$tmp/shims:$PATH" PYTHONPATH="$tmp/py-$fam" "$isolated" --which mpirun -np 2 python3 app.py
  # An executable app.py: its "#!" line names the interpreter.
  printf '#!/usr/bin/env python3\nprint(1)\n' >"$tmp/app-env.py"
  printf '#!%s -u\nprint(1)\n' "$py" >"$tmp/app-abs.py"
  chmod +x "$tmp/app-env.py" "$tmp/app-abs.py"
  expect_out "$fam: ./app.py with #!/usr/bin/env python3" "$libdir/libmlxa2a-$fam.so" \
    env PATH="$tmp/shims:$PATH" PYTHONPATH="$tmp/py-$fam" "$isolated" --which mpirun -np 2 "$tmp/app-env.py"
  expect_out "$fam: ./app.py with #!/path/to/python -u" "$libdir/libmlxa2a-$fam.so" \
    env PYTHONPATH="$tmp/py-$fam" "$isolated" --which srun -n 2 "$tmp/app-abs.py"
done

# The real thing: Debian's mpi4py, the real shim, a traced alltoall at np 2.
if [ -n "${REAL_SHIM_DIR:-}" ] && [ -n "${LAUNCHER_OMPI:-}" ] &&
   module=$("$py" -c 'import importlib.util as u; print(u.find_spec("mpi4py.MPI").origin)' 2>/dev/null) &&
   readelf -d "$module" | grep -q 'libmpi\.so\.40'; then
  expect_out "real mpi4py: --which" "$REAL_SHIM_DIR/libmlxa2a-ompi.so" \
    env MLXA2A_LIBDIR="$REAL_SHIM_DIR" "$isolated" --which "$LAUNCHER_OMPI" -np 2 "$py" "$MPI4PY_APP"
  env MLXA2A_LIBDIR="$REAL_SHIM_DIR" MLXA2A_COLL_TRACE=info \
    timeout 120 "$isolated" "$LAUNCHER_OMPI" -np 2 "$py" "$MPI4PY_APP" >"$tmp/real.out" 2>&1 || true
  # Counted with -o: the two ranks' lines may share a line of output.
  if [ "$(grep -o 'mpi4py alltoall ok rank [01] of 2' "$tmp/real.out" | sort -u | wc -l)" = 2 ] &&
     [ "$(grep -oE 'coll: MPI_Alltoall .* path=shm ' "$tmp/real.out" | wc -l)" -ge 1 ] &&
     [ "$(grep -oE 'rank=[01] bytes_per_peer=4 in_place=0 path=shm ' "$tmp/real.out" | sort -u | wc -l)" = 2 ]; then
    pass "real mpi4py: np 2 alltoall served by mlxa2a (path=shm on both ranks)"
  else
    fail "real mpi4py: np 2 run: $(cat "$tmp/real.out")"
  fi
else
  echo "skip real mpi4py run: needs python3-mpi4py for Open MPI (scripts/setup.sh) and mpirun"
fi

# --- srun ------------------------------------------------------------------------
srun="$tmp/slurm/srun"
for fam in ompi mpich; do
  var=FAKE_APP_${fam^^}
  [ -n "${!var:-}" ] || continue
  app=${!var}
  shim="$libdir/libmlxa2a-$fam.so"
  expect_out "$fam: srun passes the preload by default" "preload=$shim shim=loaded" \
    "$isolated" "$srun" -n 1 "$app"
  expect_out "$fam: srun --export=NAMES gets LD_PRELOAD added" "preload=$shim shim=loaded" \
    "$isolated" "$srun" -n 1 --export=HOME "$app"
  expect_out "$fam: srun --export NAMES (separate word)" "preload=$shim shim=loaded" \
    "$isolated" "$srun" --export HOME,PATH -n 1 "$app"
  expect_out "$fam: srun --export=ALL,LD_PRELOAD=x gets the shim in front" \
    "preload=$shim:$FAKE_SHIM shim=loaded" \
    "$isolated" "$srun" -n 1 "--export=ALL,LD_PRELOAD=$FAKE_SHIM" "$app"
  expect_error "$fam: srun --export=NONE is refused, saying why" \
    'export=NONE .*without LD_PRELOAD, so without mlxa2a' "$isolated" "$srun" --export=NONE -n 1 "$app"
  expect_error "$fam: SLURM_EXPORT_ENV=NONE is refused" 'without LD_PRELOAD, so without mlxa2a' \
    env SLURM_EXPORT_ENV=NONE "$isolated" "$srun" -n 1 "$app"
  expect_out "$fam: SLURM_EXPORT_ENV=NAMES gets LD_PRELOAD added" "preload=$shim shim=loaded" \
    env SLURM_EXPORT_ENV=HOME "$isolated" "$srun" -n 1 "$app"
  expect_out "$fam: an app argument --export=NONE is the app's" "preload=$shim shim=loaded" \
    "$isolated" "$srun" -n 1 "$app" --export=NONE
done

finish_checks
