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
#
# placement FAMILY places the ranks; it reads the caller's globals: hosts
# (array of host names; empty with virtual=1: this host), ppn, np, cores and
# virtual (1: this host only, as virtual nodes).

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

# host_list SUFFIX: the hosts joined by commas, each followed by SUFFIX
# (":2" gives "h1:2,h2:2").
host_list() {
  local list="" h
  for h in "${hosts[@]+"${hosts[@]}"}"; do list+="${list:+,}$h$1"; done
  echo "$list"
}
# Placement arguments, one per line: ppn ranks on each host (block order),
# or this host.
placement() {
  local fam=$1 list
  list=$(host_list ":$ppn")
  case "$(launcher_kind "$fam")" in
    srun) [ "$virtual" = 1 ] || printf '%s\n' "--nodelist=$(host_list "")" "--ntasks-per-node=$ppn" ;;
    ompi)
      if [ "$virtual" = 1 ]; then
        printf '%s\n' --bind-to none
        [ "$np" -le "$cores" ] || echo --oversubscribe
      else
        printf '%s\n' --host "$list" --map-by slot
      fi ;;
    mpich) [ "$virtual" = 1 ] || printf '%s\n' -hosts "$list" ;;
  esac
}
