#!/usr/bin/env bash
# A stand-in for Slurm's srun (tests/scripts/test_launchers.sh): takes -n N
# and --export as srun(1) documents them and runs the program once with the
# environment srun would give a task: everything (ALL, the default), only
# SLURM_* (NONE), or SLURM_* plus the names listed (VAR or VAR=value), ALL
# plus assignments. Prints the --export it got on stderr.
set -euo pipefail
export_spec=${SLURM_EXPORT_ENV:-ALL}
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-N|--ntasks) shift 2 ;;
    --export=*) export_spec=${1#--export=}; shift ;;
    --export) export_spec=$2; shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
echo "fake-srun: export=$export_spec" >&2
IFS=, read -r -a items <<<"$export_spec"
keep_all=0
env_args=()
for item in "${items[@]}"; do
  case "$item" in
    ALL) keep_all=1 ;;
    NONE) ;;
    *=*) env_args+=("$item") ;;
    *) [ -z "${!item+x}" ] || env_args+=("$item=${!item}") ;;
  esac
done
if [ "$keep_all" = 1 ]; then
  exec env "${env_args[@]}" "$@"
fi
while IFS='=' read -r name _; do
  case "$name" in SLURM_*) env_args+=("$name=${!name}") ;; esac
done < <(env)
exec env -i PATH=/usr/bin:/bin "${env_args[@]}" "$@"
