# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # globals hwcheck sets and reads
# Sourced by scripts/hwcheck: the checks (docs/hwcheck.md). Each one appends
# one line to $out/checks.tsv through record(): family, check, verdict (PASS,
# FAIL or SKIP), seconds, detail. Uses the globals hwcheck sets: out, fake,
# virtual, np, ppn, nodes, hosts, build, mlxa2a_run, check_env, run_env,
# run_timeout.

record() {  # FAMILY CHECK VERDICT SECONDS DETAIL
  [ "$3" != FAIL ] || { status=1; echo "$prog: FAIL: $1 $2: $5" >&2; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5//$'\t'/ }" >>"$out/checks.tsv"
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# on_each_node SCRIPT: runs the sh SCRIPT once per node (here only for
# virtual nodes), output in $out/on_nodes.out; fails like the launcher.
on_each_node() {
  local fam=${families[0]} launcher cmd=()
  if [ "$virtual" = 1 ]; then
    cmd=(sh -c "$1")
  else
    launcher=$(family_launcher "$fam")
    case "$(launcher_kind "$fam")" in
      ompi) cmd=("$launcher" --host "$(host_list :1)") ;;
      mpich) cmd=("$launcher" -hosts "$(host_list :1)") ;;
      srun) cmd=("$launcher" "--nodelist=$(host_list "")" --ntasks-per-node=1) ;;
    esac
    cmd+=(-n "$nodes" sh -c "$1")
  fi
  timeout "$run_timeout" "${cmd[@]}" >"$out/on_nodes.out" 2>&1
}

# devices: ibv_devinfo and the core count of every node, one line per port in
# $out/devices.tsv (host, hca, port, state, mtu, link layer).
check_devices() {
  local t0 log=$out/devinfo.out
  t0=$(now)
  command -v ibv_devinfo >/dev/null ||
    { record all devices FAIL 0 "ibv_devinfo not installed (rdma-core's ibverbs-utils)"; return; }
  local env_prefix=""
  [ "$fake" = 0 ] || env_prefix="LD_LIBRARY_PATH='$fv_lib' FAKEVERBS_QUIET=1 "
  # Every line tagged with its host: the nodes' outputs interleave.
  # shellcheck disable=SC2016  # expanded by each node's shell
  if ! on_each_node 'h=$(hostname); { echo "cores: $(nproc)"; '"$env_prefix"'ibv_devinfo; } 2>&1 |
                     sed "s/^/$h| /"'; then
    record all devices FAIL "$(since "$t0")" "ibv_devinfo failed: $(tail -n 3 "$out/on_nodes.out" | tr '\n' ' ')"
    return
  fi
  mv "$out/on_nodes.out" "$log"
  awk -v OFS='\t' '
    { h = $1; sub(/\|$/, "", h); sub(/^[^|]*\| /, "") }
    /^cores:/ { cores[h] = $2 }
    /hca_id:/ { hca[h] = $2 }
    /^[ \t]*port:/ { port[h] = $2 }
    /state:/ && /PORT_/ { state[h] = $2 }
    /active_mtu:/ { mtu[h] = $2 }
    /link_layer:/ { print h, hca[h], port[h], state[h], mtu[h], $2 }
    END { for (x in cores) print "cores", x, cores[x] > "/dev/stderr" }' "$log" \
    >"$out/devices.tsv" 2>"$out/cores.txt"
  min_cores=$(awk '{ if (!m || $3 < m) m = $3 } END { print m + 0 }' "$out/cores.txt")
  local ports active
  ports=$(wc -l <"$out/devices.tsv")
  active=$(grep -c PORT_ACTIVE "$out/devices.tsv" || true)
  if [ "$ports" = 0 ]; then record all devices FAIL "$(since "$t0")" "ibv_devinfo listed no port"
  elif [ "$active" = 0 ]; then record all devices FAIL "$(since "$t0")" "no ACTIVE port of $ports"
  else record all devices PASS "$(since "$t0")" "$active of $ports ports ACTIVE"; fi
}

# run_prog FAMILY NAME LIMIT ENV EXE ARGS...: EXE through mlxa2a on every
# node with the check environment plus ENV (space-separated K=V, later
# wins); output in $out/FAMILY-NAME.out. Sets run_rc and run_secs.
run_prog() {
  local fam=$1 name=$2 limit=$3 extra=() kv; read -ra extra <<<"$4"; shift 4
  local launcher log=$out/$fam-$name.out fwd=() place=() t0
  local envs=("${check_env[@]}" "${run_env[@]+"${run_env[@]}"}" "${extra[@]+"${extra[@]}"}")
  launcher=$(family_launcher "$fam")
  if [ "$(launcher_kind "$fam")" = ompi ]; then
    for kv in "${envs[@]}"; do fwd+=(-x "${kv%%=*}"); done
  fi
  mapfile -t place < <(placement "$fam")
  local cmd=(env "${envs[@]}" timeout "$limit" "$mlxa2a_run" "$launcher"
             "${place[@]+"${place[@]}"}" "${fwd[@]+"${fwd[@]}"}" -n "$np" "$@")
  printf '%q ' "${cmd[@]}" >"$log.cmd"
  t0=$(now)
  run_rc=0
  "${cmd[@]}" >"$log" 2>&1 || run_rc=$?
  run_secs=$(since "$t0")
}

# judge FAMILY NAME ALL_RDMA [EXTRA_TEST_DESCRIPTION]: the verdict of the
# last run_prog: it ended, RESULT PASS, no warning or error from mlxa2a,
# path=rdma on some traced call (ALL_RDMA=1: on every call whose reason is
# not a single-node one). Sets judged (PASS/FAIL) and judged_detail
# ("<rdma calls>/<traced calls> rdma, writes=<sum of writes_posted>").
judge() {
  local fam=$1 name=$2 all_rdma=$3 log=$out/$1-$2.out
  local traced rdma other writes
  traced=$(grep -c 'coll: MPI_Alltoall.* path=' "$log" || true)
  rdma=$(grep -c 'coll: MPI_Alltoall.* path=rdma' "$log" || true)
  other=$(grep 'coll: MPI_Alltoall.* path=' "$log" | grep -v ' path=rdma' |
          grep -cvE 'reason=(invalid argument|single-node team|intercommunicator)' || true)
  writes=$(sed -n 's/.*stats rdma:.* writes_posted=\([0-9]*\).*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
  judged_detail="$rdma/$traced rdma, writes=$writes"
  judged=FAIL
  if [ "$run_rc" != 0 ]; then
    judged_detail="the run failed (exit $run_rc; command in $log.cmd): $(tail -n 3 "$log" | tr '\n' ' ')"
  elif ! grep -q '^RESULT PASS' "$log"; then
    judged_detail="no RESULT PASS ($judged_detail; output in $log)"
  elif grep -qE '^\[mlxa2a [0-9]+:[0-9]+\] (warn|error):' "$log"; then
    judged_detail="mlxa2a warned: $(grep -m1 -E '(warn|error):' "$log")"
  elif [ "$rdma" = 0 ] || { [ "$all_rdma" = 1 ] && [ "$other" != 0 ]; }; then
    judged_detail="$((traced - rdma)) of $traced calls did not take path=rdma"
  else
    judged=PASS
  fi
}

# A program run judged by judge(), recorded as CHECK.
simple_check() {  # FAMILY CHECK ALL_RDMA ENV EXE ARGS...
  local fam=$1 name=$2 all=$3 env=$4; shift 4
  run_prog "$fam" "$name" "$run_timeout" "$env" "$@"
  judge "$fam" "$name" "$all"
  record "$fam" "$name" "$judged" "$run_secs" "$judged_detail"
}

# rdma-counts: a2a_rdma's 40 one-round calls (world, a duplicate, both
# halves): every call path=rdma, and with an even ppn in block order the
# leaders' writes are exactly 40 M(M-1). Its job report (MLXA2A_COLL_STATS=
# json) holds each leader's device and QoS: the per-node report.
check_rdma_counts() {
  local fam=$1 expect
  rm -f "$out/$fam-stats.json"
  run_prog "$fam" rdma-counts "$run_timeout" "MLXA2A_COLL_STATS=json:$out/$fam-stats.json" \
    "$build/tests/mpi/a2a_rdma-$fam"
  judge "$fam" rdma-counts 1
  if [ "$judged" = PASS ] && [ $((ppn % 2)) = 0 ]; then
    expect=$((40 * nodes * (nodes - 1)))
    [[ $judged_detail == *"writes=$expect" ]] ||
      { judged=FAIL; judged_detail="expected writes=$expect, got $judged_detail"; }
  fi
  if [ "$judged" = PASS ] && [ ! -s "$out/$fam-stats.json" ]; then
    judged=FAIL
    judged_detail="no job report at $out/$fam-stats.json (rank 0 writes it: --keep DIR on a file system every node sees)"
  fi
  record "$fam" rdma-counts "$judged" "$run_secs" "$judged_detail"
}

# leaders: two leaders per node (MLXA2A_LEADERS=2), every call path=rdma, and
# the debug team line says leaders=2.
check_leaders() {
  local fam=$1
  if [ "$ppn" -lt 2 ]; then record "$fam" leaders SKIP 0 "needs --ppn 2 or more"; return; fi
  run_prog "$fam" leaders "$run_timeout" "MLXA2A_LEADERS=2 MLXA2A_COLL_TRACE=debug" \
    "$build/tests/mpi/a2a_rdma-$fam"
  judge "$fam" leaders 1
  if [ "$judged" = PASS ] && ! grep -q ' team id=.* nodes=[2-9].* leaders=2 ' "$out/$fam-leaders.out"; then
    judged=FAIL; judged_detail="no multi-node team line says leaders=2 ($judged_detail)"
  fi
  record "$fam" leaders "$judged" "$run_secs" "$judged_detail"
}

# The bytes a run's ranks sent zero-copy (their "stats zcopy:" lines).
zero_copy_bytes() {
  sed -n 's/.*stats zcopy:.* bytes_zero_copy=\([0-9]*\).*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }'
}

# zcopy: zero-copy forced from 1 byte per peer: the leaders' writes gather
# from the ranks' buffers (trace "zcopy", bytes_zero_copy > 0).
check_zcopy() {
  local fam=$1 zc
  run_prog "$fam" zcopy "$run_timeout" "MLXA2A_NET_ZCOPY_THRESHOLD=1" "$build/tests/mpi/a2a_rdma-$fam"
  judge "$fam" zcopy 1
  zc=$(zero_copy_bytes "$out/$fam-zcopy.out")
  if [ "$judged" = PASS ] && [ "$zc" = 0 ]; then
    judged=FAIL; judged_detail="no byte went zero-copy: $(grep -m1 -o 'no-zcopy-because=.*' "$out/$fam-zcopy.out" || true)"
  fi
  record "$fam" zcopy "$judged" "$run_secs" "$judged_detail, zero-copy bytes=$zc"
}

# fault: a rank SIGKILLed between calls (a2a_rdma kill), MLXA2A_NET_TIMEOUT
# forced to 3 s. The job must end within the bound (the launcher or the
# timeout ends it; its exit status is not judged), and on every node neither
# a process (10 s after the launcher returned) nor a /dev/shm/mlxa2a-*
# segment of its ranks may be left (segments found are removed, and named).
check_fault() {
  local fam=$1 bound=$2 pids
  run_prog "$fam" fault "$bound" "MLXA2A_NET_TIMEOUT=3000" "$build/tests/mpi/a2a_rdma-$fam" kill
  pids=$(awk '$1 == "PID" { printf "%s:%s ", $3, $4 }' "$out/$fam-fault.out")
  if [ "$run_rc" = 124 ]; then
    record "$fam" fault FAIL "$run_secs" "the job did not end within ${bound}s after a rank was killed"; return
  fi
  if [ "$(wc -w <<<"$pids")" != "$np" ]; then
    record "$fam" fault FAIL "$run_secs" "$(wc -w <<<"$pids") of $np ranks started (exit $run_rc): $(tail -n 2 "$out/$fam-fault.out" | tr '\n' ' ')"
    return
  fi
  # Each node: its ranks get 10 s to be gone (a loaded node reaps the
  # launcher's last kills slowly; a zombie counts as gone), then whatever
  # still runs or lies in /dev/shm under their pids is left behind.
  # shellcheck disable=SC2016  # expanded by each node's shell
  local script='h=$(hostname); mine=""; for hp in '"$pids"'; do [ "${hp%%:*}" = "$h" ] && mine="$mine ${hp#*:}"; done
    alive() { [ -e /proc/$1 ] && ! grep -q "^[0-9]* (.*) Z" /proc/$1/stat 2>/dev/null; }
    i=0; while [ $i -lt 50 ]; do any=0; for p in $mine; do alive $p && any=1; done; [ $any = 0 ] && break; sleep 0.2; i=$((i+1)); done
    for p in $mine; do alive $p && echo "leftover $h process $p";
      for f in /dev/shm/mlxa2a-*-"$p"-*; do [ -e "$f" ] && echo "leftover $h $f" && rm -f "$f"; done; done; true'
  if ! on_each_node "$script"; then
    record "$fam" fault FAIL "$run_secs" "could not look for leftovers: $(tail -n 2 "$out/on_nodes.out" | tr '\n' ' ')"
    return
  fi
  local left
  left=$(grep '^leftover' "$out/on_nodes.out" | cut -d' ' -f2- | tr '\n' ';' || true)
  if [ -n "$left" ]; then
    record "$fam" fault FAIL "$run_secs" "left behind (segments now removed): $left"
  else
    record "$fam" fault PASS "$run_secs" "ended in ${run_secs}s (exit $run_rc), nothing left in /dev/shm or running"
  fi
}

# osu: osu_alltoall without and with mlxa2a (scripts/compare.sh), alternating;
# the medians and ratios go to $out/FAMILY-osu.tsv. No pass-through control
# (--no-control): the report has no place for its columns yet.
check_osu() {
  local fam=$1 kv place=() args=() t0 log=$out/$1-osu.out
  args=(--mpi "$fam" --np "$np" --rounds "$rounds" --sizes "$sizes" --build "$build" --timeout "$run_timeout"
        --no-control)
  for kv in "${run_env[@]+"${run_env[@]}"}"; do args+=(--env "$kv"); done
  mapfile -t place < <(placement "$fam")
  for kv in "${place[@]+"${place[@]}"}"; do args+=(--launcher-arg "$kv"); done
  [ "$fake" = 0 ] || args+=(--iters 20 --warmup 2)
  [ -z "$launcher_override" ] || args+=(--launcher "$launcher_override")
  t0=$(now)
  if "$top/scripts/compare.sh" "${args[@]}" >"$log" 2>"$log.err"; then
    awk -v OFS='\t' -v f="$fam" '$1 ~ /^[0-9]+$/ { print f, $1, $2, $3, $4 }' "$log" >"$out/$fam-osu.tsv"
    record "$fam" osu PASS "$(since "$t0")" "$(awk '{ r = r (r ? " " : "") $2 ":" $5 } END { print r }' "$out/$fam-osu.tsv")"
  else
    record "$fam" osu FAIL "$(since "$t0")" "compare.sh failed: $(tail -n 3 "$log.err" | tr '\n' ' ')"
  fi
}

# sizes: 1 B to 1 MiB per peer on world and a duplicate (a2a_rdma sizes;
# at most 256 MiB of buffers per rank), every call path=rdma; the calls past
# one staging round are pipelined (MLXA2A_NET_PIPELINE's default), seen as
# more leader writes than one per pair of nodes and call.
check_sizes() {
  local fam=$1 calls writes one_round largest
  run_prog "$fam" sizes "$run_timeout" "" "$build/tests/mpi/a2a_rdma-$fam" sizes
  judge "$fam" sizes 1
  calls=$(grep -c 'coll: MPI_Alltoall.* path=rdma' "$out/$fam-sizes.out" || true)
  largest=$(awk '$1 == "LARGEST" { print $2 }' "$out/$fam-sizes.out")
  writes=${judged_detail##*writes=}
  one_round=$((calls * nodes * (nodes - 1) / np))  # calls: every rank's trace lines
  if [ "$judged" = PASS ] && [ "$writes" -le "$one_round" ]; then
    judged=FAIL; judged_detail="no call took more than one round ($judged_detail)"
  fi
  record "$fam" sizes "$judged" "$run_secs" "1 B to ${largest:-?} B per peer: $judged_detail (one round per call would be $one_round)"
}

# skew: the last node's first rank (its leader) sleeps $skew_ms before its
# second call (the first set RDMA up), longer than the network time-out
# forced to $skew_timeout_ms; the others wait for it inside MPI_Alltoall. A
# late rank is not a failed one: every call must succeed with the right
# data, path=rdma.
check_skew() {
  local fam=$1 late=$((np - ppn))
  run_prog "$fam" skew "$run_timeout" \
    "MLXA2A_NET_TIMEOUT=$skew_timeout_ms A2A_SKEW_RANK=$late A2A_SKEW_MS=$skew_ms A2A_SKEW_CALL=1" \
    "$build/tests/mpi/a2a_rdma-$fam"
  judge "$fam" skew 1
  record "$fam" skew "$judged" "$run_secs" "rank $late ${skew_ms} ms late at call 2 (MLXA2A_NET_TIMEOUT=$skew_timeout_ms): $judged_detail"
}

# fork: system() after each of 20 calls from the same buffers, zero-copy
# forced (the leaders' registrations of the ranks' send buffers live across
# the forks, core/mlx5/fork_watch.h): right data, path=rdma, and bytes went
# zero-copy.
check_fork() {
  local fam=$1 zc
  run_prog "$fam" fork "$run_timeout" "MLXA2A_NET_ZCOPY_THRESHOLD=1" "$build/tests/mpi/a2a_rdma-$fam" fork 20
  judge "$fam" fork 1
  zc=$(zero_copy_bytes "$out/$fam-fork.out")
  if [ "$judged" = PASS ] && [ "$zc" = 0 ]; then
    judged=FAIL; judged_detail="no byte went zero-copy ($judged_detail)"
  fi
  record "$fam" fork "$judged" "$run_secs" "20 calls, system() after each: $judged_detail, zero-copy bytes=$zc"
}
