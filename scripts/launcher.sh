# shellcheck shell=bash
# Sourced by scripts/compare.sh and scripts/hwcheck: which program starts an
# MPI family's ranks, and the syntax it speaks.
#
# A launcher is Debian's mpirun.openmpi / mpiexec.mpich by default, or what
# --launcher names (HPC-X's or Spack's mpirun, srun; a path or a name on
# PATH). Its syntax ("kind") is srun's for a program called srun*, else that
# of the family it launches: Open MPI's mpirun (-x VAR forwards a variable,
# --oversubscribe, --host h:n) or MPICH's hydra (-hosts h:n; the environment
# goes along). Every kind takes "-n N".

launcher_override=""

family_label() { case "$1" in ompi) echo "Open MPI" ;; mpich) echo "MPICH" ;; esac; }

family_launcher() {
  if [ -n "$launcher_override" ]; then echo "$launcher_override"; return; fi
  case "$1" in ompi) echo mpirun.openmpi ;; mpich) echo mpiexec.mpich ;; esac
}

# launcher_kind FAMILY: ompi, mpich or srun.
launcher_kind() {
  case "$(basename -- "$(family_launcher "$1")")" in
    srun*) echo srun ;;
    *) echo "$1" ;;
  esac
}

# Why FAMILY's launcher cannot run, or nothing.
launcher_missing() {
  local l
  l=$(family_launcher "$1")
  command -v -- "$l" >/dev/null || echo "launcher $l not found${launcher_override:+ (--launcher)}"
}
