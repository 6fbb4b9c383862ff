#!/usr/bin/env bash
# Side-by-side osu_alltoall latency without and with mlxa2a, per MPI family.
#
# Each round runs the benchmark without mlxa2a, with it, and as a control
# with mlxa2a preloaded in pass-through (MLXA2A_TUNE=pmpi: every call goes to
# PMPI_Alltoall), in an order that rotates from round to round, so that drift
# on a shared, noisy machine hits every mode alike and no mode always runs
# first. The table shows, per message size, the median over rounds of the
# benchmark's average latency, the ratio mlxa2a / PMPI (below 1: mlxa2a is
# faster), and the control's ratio and spread: the noise band a ratio must
# leave to mean something (scripts/compare_stats.sh). The with-mlxa2a runs go
# through mlxa2a-run, so the comparison also proves the launcher picks and
# loads the right shim.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prog=compare.sh
# shellcheck source=scripts/launcher.sh
. "$top/scripts/launcher.sh"
# shellcheck source=scripts/compare_stats.sh
. "$top/scripts/compare_stats.sh"

usage() {
  cat <<EOF
Usage: scripts/$prog [options]

Runs osu_alltoall without mlxa2a, with it, and with it in pass-through (the
control: MLXA2A_TUNE=pmpi), alternating, on each MPI family and prints one
table per family:
  # Size  PMPI(us)  mlxa2a(us)  ratio  control  ctl-spread
ratio = mlxa2a / PMPI and control = control / PMPI (medians over rounds);
ctl-spread = the largest |control / PMPI - 1| over the rounds: a ratio within
1 +- ctl-spread is within this run's noise.

Options:
  --np N           ranks per run (default 2)
  --rounds R       rounds of (without, with, control) runs, the order rotated
                   every round (default 5)
  --no-control     no control runs (rounds of without, with; the table and
                   plot lose the control's columns): quicker, no noise band
  --sizes MIN:MAX  bytes per peer, doubling (default 1:65536; osu -m)
  --iters N        timed iterations per size (osu -i; default osu's 1000,
                   100 above 8 KiB)
  --warmup N       warm-up iterations per size (osu -x; default osu's)
  --mpi WHICH      ompi, mpich, both (both required) or auto (default: every
                   family that has a benchmark and a launcher)
  --env VAR=VAL    set for the with-mlxa2a runs only (repeatable), for
                   example --env MLXA2A_LOG_LEVEL=info; the control runs get
                   them too, but always MLXA2A_TUNE=pmpi
  --launcher CMD   start the ranks with CMD instead of mpirun.openmpi /
                   mpiexec.mpich: e.g. HPC-X's or Spack's mpirun (Open MPI
                   syntax for --mpi ompi, hydra's for mpich) or srun (any
                   family; its own syntax); a path or a name on PATH
  --launcher-arg A pass A to the launcher in every run (repeatable), for
                   example --launcher-arg --hostfile --launcher-arg hosts
  --check          also validate every received byte (osu -c); a failure
                   fails the comparison
  --build DIR      mlxa2a build directory (default \$BUILD_DIR or
                   <repo>/build)
  --timeout SEC    limit per run (default 600)
  --keep DIR       keep every run's output in DIR
  --csv FILE       write every round's result to FILE (not only the medians):
                   mpi,mode,round,bytes,avg_latency_us,position (mode: pmpi,
                   mlxa2a or control; position: the run's place in its round)
  --plot FILE      draw FILE.png or FILE.svg with gnuplot: per size, median
                   latency without and with mlxa2a and their ratio, per MPI,
                   min-max over rounds as bands, and the control's ratio and
                   band (scripts/compare_plot.gp)
  --hosts R1,R2,.. run on a pretend cluster (scripts/cluster, docs/hosts.md,
                   needs root): R1 ranks on host h0, R2 on h1, ...; --np is
                   their sum. Launched by each MPI's own launcher over the
                   cluster's ssh agent; the shim goes in by LD_PRELOAD.
  -h, --help       this help

Benchmarks: <build>/bench/osu_alltoall-{ompi,mpich}, or OSU's own osu_alltoall
when OSU_ALLTOALL_OMPI / OSU_ALLTOALL_MPICH name it. Launchers: --launcher, else
mpirun.openmpi and mpiexec.mpich (never the 'mpirun' alternative, which may be
either). Every launcher gets "-n N".
EOF
}

die() {
  echo "$prog: error: $*" >&2
  exit 1
}

usage_error() {
  echo "$prog: $*" >&2
  echo "Try 'scripts/$prog --help'." >&2
  exit 2
}

positive_int() {
  [[ $2 =~ ^[1-9][0-9]*$ ]] || usage_error "$1 needs a positive integer, not '$2'"
}

np=2
rounds=5
sizes=1:65536
iters=""
warmup=""
which_mpi=auto
check=0
control=1
build=${BUILD_DIR:-$top/build}
run_timeout=600
keep=""
extra_env=()
hosts=""
launcher_extra=()
csv_file=""
plot_file=""
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in
    -h|--help) usage; exit 0 ;;
    --check) check=1; shift; continue ;;
    --no-control) control=0; shift; continue ;;
    --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
  esac
  [ $# -ge 2 ] || usage_error "$opt needs a value"
  val=$2
  shift 2
  case "$opt" in
    --np) positive_int "$opt" "$val"; np=$val ;;
    --rounds) positive_int "$opt" "$val"; rounds=$val ;;
    --sizes)
      [[ $val =~ ^([1-9][0-9]*:)?[1-9][0-9]*$ ]] || usage_error "--sizes wants MIN:MAX or MAX, not '$val'"
      sizes=$val ;;
    --iters) positive_int "$opt" "$val"; iters=$val ;;
    --warmup) [[ $val =~ ^[0-9]+$ ]] || usage_error "--warmup needs a number"; warmup=$val ;;
    --mpi)
      case "$val" in ompi|mpich|both|auto) which_mpi=$val ;;
        *) usage_error "--mpi wants ompi, mpich, both or auto, not '$val'" ;; esac ;;
    --env)
      [[ $val =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage_error "--env wants VAR=VALUE, not '$val'"
      extra_env+=("$val") ;;
    --build) build=$val ;;
    --launcher-arg) launcher_extra+=("$val") ;;
    --launcher) [ -n "$val" ] || usage_error "--launcher needs a command"; launcher_override=$val ;;
    --timeout) positive_int "$opt" "$val"; run_timeout=$val ;;
    --keep) keep=$val ;;
    --csv) csv_file=$val ;;
    --plot)
      [[ $val =~ \.(png|svg)$ ]] || usage_error "--plot wants a FILE.png or FILE.svg, not '$val'"
      plot_file=$val ;;
    --hosts)
      [[ $val =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage_error "--hosts wants ranks per host like 2,2, not '$val'"
      hosts=$val ;;
    *) usage_error "unknown option '$opt'" ;;
  esac
done
if [ -n "$hosts" ]; then
  np=$(( ${hosts//,/+} ))
  [ -z "$launcher_override" ] || usage_error "--hosts launches through the pretend cluster; --launcher does not apply"
fi
if [ -n "$plot_file" ] && ! command -v gnuplot >/dev/null; then
  die "--plot needs gnuplot (scripts/setup.sh installs it: apt-get install gnuplot-nox)"
fi
[ -d "$build" ] || die "build directory $build not found (run scripts/build.sh or pass --build)"
build=$(cd "$build" && pwd)

# mlxa2a-run as the build configured it (it finds <build>/shim), else the
# source copy pointed at the build's shims.
if [ -x "$build/scripts/mlxa2a-run" ]; then
  mlxa2a_run=$build/scripts/mlxa2a-run
else
  mlxa2a_run=$top/scripts/mlxa2a-run
  export MLXA2A_LIBDIR=${MLXA2A_LIBDIR:-$build/shim}
fi

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  out_dir=$(cd "$keep" && pwd)
else
  out_dir=$(mktemp -d)
  trap 'rm -rf "$out_dir"' EXIT
fi

cores=$(nproc 2>/dev/null || echo 1)
cluster_state=""
if [ -n "$hosts" ]; then
  "$top/scripts/cluster" check || exit $?
  # Each host has its own /tmp: what the jobs run from there must be exposed.
  expose=(--expose "$build")
  for p in "${OSU_ALLTOALL_OMPI:-}" "${OSU_ALLTOALL_MPICH:-}" "${MLXA2A_LIBDIR:-}"; do
    [[ $p != */* ]] || expose+=(--expose "$p")  # (a bare name is found on PATH)
  done
  cluster_state=$("$top/scripts/cluster" up --hosts "$(tr ',' '\n' <<<"$hosts" | wc -l)" --watch $$ "${expose[@]}")
  trap '"$top/scripts/cluster" down "$cluster_state"; [ -n "$keep" ] || rm -rf "$out_dir"' EXIT
fi
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

bench_args=(-m "$sizes")
[ -z "$iters" ] || bench_args+=(-i "$iters")
[ -z "$warmup" ] || bench_args+=(-x "$warmup")
[ "$check" = 0 ] || bench_args+=(-c)

family_bench() {
  local var
  var=OSU_ALLTOALL_$(tr '[:lower:]' '[:upper:]' <<<"$1")
  if [ -n "${!var:-}" ]; then echo "${!var}"; else echo "$build/bench/osu_alltoall-$1"; fi
}

# Why a family cannot run, or nothing when it can.
family_missing() {
  local bench
  bench=$(family_bench "$1")
  if [ ! -x "$bench" ]; then
    echo "benchmark $bench not found (build mlxa2a, or set OSU_ALLTOALL_$(tr '[:lower:]' '[:upper:]' <<<"$1"))"
  else
    launcher_missing "$1"
  fi
}

families=()
case "$which_mpi" in
  ompi|mpich)
    why=$(family_missing "$which_mpi")
    [ -z "$why" ] || die "$(family_label "$which_mpi"): $why"
    families=("$which_mpi") ;;
  both)
    for f in ompi mpich; do
      why=$(family_missing "$f")
      [ -z "$why" ] || die "$(family_label "$f"): $why"
    done
    families=(ompi mpich) ;;
  auto)
    for f in ompi mpich; do
      why=$(family_missing "$f")
      if [ -z "$why" ]; then families+=("$f"); else echo "$prog: skipping $(family_label "$f"): $why" >&2; fi
    done
    [ ${#families[@]} -gt 0 ] || die "no MPI family can run (see above)" ;;
esac

# mode_env MODE: sets mode_vars to what MODE's ranks get: nothing (pmpi),
# the --env settings (mlxa2a), those with MLXA2A_TUNE=pmpi instead of any
# MLXA2A_TUNE of theirs (control).
mode_env() {
  local kv
  mode_vars=()
  [ "$1" != pmpi ] || return 0
  for kv in "${extra_env[@]+"${extra_env[@]}"}"; do
    [ "$1" = control ] && [[ $kv == MLXA2A_TUNE=* ]] || mode_vars+=("$kv")
  done
  [ "$1" != control ] || mode_vars+=(MLXA2A_TUNE=pmpi)
}

# run_one FAMILY MODE ROUND POSITION: runs the benchmark once, appends
# "MODE SIZE AVG ROUND POSITION" lines to $out_dir/FAMILY.data. Returns
# non-zero (with the output shown) on a failed or invalid run.
run_one() {
  local fam=$1 mode=$2 round=$3 position=$4 bench launcher kind log err rc=0 cmd=() mode_vars
  bench=$(family_bench "$fam")
  launcher=$(family_launcher "$fam")
  kind=$(launcher_kind "$fam")
  log=$out_dir/$fam-$mode-$round.out
  err=$out_dir/$fam-$mode-$round.err
  local launcher_args=("${launcher_extra[@]+"${launcher_extra[@]}"}" -n "$np")
  if [ "$kind" = ompi ] && [ "$np" -gt "$cores" ] && [[ " ${launcher_extra[*]-} " != *" --oversubscribe "* ]]; then
    launcher_args+=(--oversubscribe)
  fi
  if [ -n "$hosts" ]; then
    cmd=("$top/scripts/cluster" launch --state "$cluster_state" --family "$fam" --ranks "$hosts"
         --timeout "$run_timeout")
    # MPICH 4.0.2 over UCX tcp may hang in MPI_Finalize: bounded once the
    # last size's line is out (scripts/cluster_supervise.py).
    [ "$fam" = ompi ] || cmd+=(--done-pattern "^${sizes#*:} " --finalize-grace 5)
    if [ "$mode" != pmpi ]; then
      cmd+=(--env "LD_PRELOAD=$shim")
      mode_env "$mode"
      for kv in "${mode_vars[@]+"${mode_vars[@]}"}"; do cmd+=(--env "$kv"); done
    fi
    cmd+=(-- "$bench" "${bench_args[@]}")
  elif [ "$mode" = pmpi ]; then
    cmd=(timeout "$run_timeout" "$launcher" "${launcher_args[@]}" "$bench" "${bench_args[@]}")
  else
    mode_env "$mode"
    if [ "$kind" = ompi ]; then
      # Open MPI forwards only what -x names to ranks (on other nodes).
      for kv in "${mode_vars[@]+"${mode_vars[@]}"}"; do launcher_args+=(-x "${kv%%=*}"); done
    fi
    cmd=(env "${mode_vars[@]+"${mode_vars[@]}"}" timeout "$run_timeout"
         "$mlxa2a_run" "$launcher" "${launcher_args[@]}" "$bench" "${bench_args[@]}")
  fi
  printf '%q ' "${cmd[@]}" >"$out_dir/$fam-$mode-$round.cmd"
  "${cmd[@]}" >"$log" 2>"$err" || rc=$?
  local problem=""
  if [ "$rc" = 124 ]; then
    problem="timed out after ${run_timeout}s"
  elif [ "$rc" != 0 ]; then
    problem="exit status $rc"
  elif grep -qE 'cannot be preloaded|mlxa2a-run: error' "$err"; then
    problem="the shim was not loaded"
  elif grep -qE 'Fail|DATA VALIDATION ERROR' "$log"; then
    problem="validation failed"
  elif ! grep -qE '^[0-9]+ ' "$log"; then
    problem="no results in the output"
  fi
  if [ -n "$problem" ]; then
    {
      echo "$prog: $(family_label "$fam") run ($mode, round $round) failed: $problem"
      echo "  command: $(cat "$out_dir/$fam-$mode-$round.cmd")"
      sed 's/^/  stdout: /' "$log" | tail -n 20
      sed 's/^/  stderr: /' "$err" | tail -n 20
    } >&2
    return 1
  fi
  awk -v mode="$mode" -v round="$round" -v pos="$position" \
    '$1 ~ /^[0-9]+$/ && NF >= 2 { print mode, $1, $2, round, pos }' "$log" >>"$out_dir/$fam.data"
}

# The cheapest flag exchange among $np processes of this host (no MPI, no
# data): what any shared-memory alltoall's latency sits on. It drifts with the
# host, so each table gets its own reading.
host_floor() {
  local tool=$build/bench/handoff_floor spin=2000 line
  [ -z "$hosts" ] || { echo "n/a (pretend hosts $hosts; kernel TCP between them)"; return; }
  [ -x "$tool" ] || { echo "unknown ($tool not built)"; return; }
  [ "$np" -le "$cores" ] || spin=16  # mlxa2a's setting when ranks outnumber cores
  if line=$("$tool" -n "$np" -s "$spin" -r 3 2>&1); then
    echo "${line#handoff_floor: } ($tool)"
  else
    echo "unknown (handoff_floor failed: $line)"
  fi
}

# Every round of the given families, one CSV line per run and size.
write_csv() {
  local fam
  {
    echo "mpi,mode,round,bytes,avg_latency_us,position"
    for fam in "$@"; do
      awk -v fam="$fam" '{ printf "%s,%s,%s,%s,%s,%s\n", fam, $1, $4, $2, $3, $5 }' "$out_dir/$fam.data"
    done
  } >"$csv_file"
  echo "$prog: every round in $csv_file" >&2
}

draw_plot() {
  local fam args=()
  for fam in "$@"; do
    summary_data "$fam"
    args+=("$out_dir/$fam.plot" "$(family_label "$fam")")
  done
  gnuplot -e "with_control=$control" -c "$top/scripts/compare_plot.gp" "$plot_file" \
    "osu\\_alltoall without and with mlxa2a, np=$np${hosts:+ on hosts $hosts}, $rounds rounds" "${args[@]}" \
    >"$out_dir/gnuplot.log" 2>&1 || die "gnuplot failed: $(cat "$out_dir/gnuplot.log")"
  [ -s "$plot_file" ] || die "gnuplot wrote no $plot_file"
  echo "$prog: plot in $plot_file" >&2
}

# Prints the table for one family from its data file.
print_table() {
  local fam=$1 shim=$2 env_text="none"
  [ ${#extra_env[@]} = 0 ] || env_text="${extra_env[*]}"
  echo
  echo "# mlxa2a vs PMPI: $(family_label "$fam"), np=$np${hosts:+ on pretend hosts $hosts}, $rounds rounds alternating $mode_words, order rotated"
  echo "# benchmark: $(family_bench "$fam") ${bench_args[*]}"
  [ -n "$hosts" ] || echo "# launcher: $(family_launcher "$fam") ($(launcher_kind "$fam") syntax)"
  echo "# shim: $shim (${hosts:+LD_PRELOAD, chosen by }mlxa2a-run); with-mlxa2a env: $env_text"
  echo "# host: $(uname -n), $cores cores, load average $load_at_start at start"
  echo "# host floor, measured now: $(host_floor)"
  echo "# median over rounds of the per-size average latency; ratio = mlxa2a / PMPI"
  if [ "$control" = 1 ]; then
    echo "# control: mlxa2a preloaded with MLXA2A_TUNE=pmpi (every call to PMPI_Alltoall); control = its"
    echo "# median / PMPI's; ctl-spread = largest |control / PMPI - 1| over rounds: the noise band"
  fi
  table_rows "$fam"
}

if [ "$np" -gt "$cores" ]; then
  echo "$prog: note: $np ranks on $cores cores; MPICH ranks spin while they wait, so its runs will be slow" >&2
fi

modes=(pmpi mlxa2a) mode_words="without/with mlxa2a"
[ "$control" = 0 ] || { modes+=(control); mode_words+="/pass-through control"; }
load_at_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo unknown)
status=0
completed=()
for fam in "${families[@]}"; do
  bench=$(family_bench "$fam")
  if ! shim=$("$mlxa2a_run" --which "$bench" 2>"$out_dir/which.err"); then
    echo "$prog: $(family_label "$fam"): $(cat "$out_dir/which.err")" >&2
    status=1
    continue
  fi
  : >"$out_dir/$fam.data"
  ok=1
  for ((r = 1; r <= rounds; r++)); do
    echo "$prog: $(family_label "$fam") np=$np round $r/$rounds" >&2
    for ((p = 0; p < ${#modes[@]}; p++)); do  # round r starts (r - 1) modes further on
      run_one "$fam" "${modes[(r - 1 + p) % ${#modes[@]}]}" "$r" $((p + 1)) || { ok=0; break 2; }
    done
  done
  if [ "$ok" = 1 ]; then
    print_table "$fam" "$shim"
    completed+=("$fam")
  else
    status=1
  fi
done
[ -z "$csv_file" ] || write_csv "${completed[@]+"${completed[@]}"}"
if [ -n "$plot_file" ]; then
  if [ ${#completed[@]} -gt 0 ]; then draw_plot "${completed[@]}"; else status=1; echo "$prog: nothing to plot" >&2; fi
fi
[ -z "$keep" ] || echo "$prog: raw outputs in $out_dir" >&2
exit "$status"
