# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # globals hwcheck sets and reads
# Sourced by scripts/hwcheck: what each node says about itself besides the
# checks (docs/hwcheck.md, "Node facts" and "Counters"):
#   gather_facts       ulimit -l, kernel, rdma-core version, fork settings,
#                      every port's firmware, link layer and GIDs (ibv_devinfo
#                      -v) and IP prefixes, tagged per host, in $out/facts.out
#                      (scripts/hwcheck_fabric.py reads them);
#   snapshot_counters  every port's hw_counters/ and counters/ under
#                      /sys/class/infiniband ($MLXA2A_HWCHECK_SYSFS: another
#                      tree, for tests) in $out/counters-N.snap;
#   judge_counters     what grew during a check (hwcheck_counters.py).
# Uses on_each_node and record from hwcheck_checks.sh.

sysfs_root=${MLXA2A_HWCHECK_SYSFS:-/sys/class/infiniband}

# The sh script each node runs for its counters: one "host|<hca>/ports/<p>/
# <dir>/<name> <value>" line per counter, or "host|none" without the tree.
counter_snapshot_script() {
  # shellcheck disable=SC2016  # expanded by each node's shell
  printf '%s' 'h=$(hostname); r='"'$sysfs_root'"'
    if [ ! -d "$r" ]; then echo "$h|none"; exit 0; fi
    for f in "$r"/*/ports/*/hw_counters/* "$r"/*/ports/*/counters/*; do
      [ -f "$f" ] && v=$(cat "$f" 2>/dev/null) && echo "$h|${f#"$r"/} $v"
    done; true'
}

# The sh script each node runs for its facts: "host| fact KEY VALUE" lines,
# then "host| dev ..." (ibv_devinfo -v) and "host| ip ..." (ip -o addr).
facts_script() {
  local env_prefix=""
  [ "$fake" = 0 ] || env_prefix="LD_LIBRARY_PATH='$fv_lib' FAKEVERBS_QUIET=1 "
  # shellcheck disable=SC2016  # expanded by each node's shell
  printf '%s' 'h=$(hostname)
    rc=$(dpkg-query -W -f="\${Version}" rdma-core 2>/dev/null || rpm -q --qf "%{VERSION}" rdma-core 2>/dev/null || echo unknown)
    {
      echo "fact ulimit_l $(ulimit -l)"
      echo "fact kernel $(uname -r)"
      echo "fact rdma_core $rc"
      echo "fact fork_env RDMAV_FORK_SAFE=${RDMAV_FORK_SAFE-unset} IBV_FORK_SAFE=${IBV_FORK_SAFE-unset}"
      echo "fact sysfs $([ -d '"'$sysfs_root'"' ] && echo yes || echo no)"
      '"$env_prefix"'ibv_devinfo -v 2>&1 | sed "s/^/dev /"
      ip -o addr show 2>/dev/null | sed "s/^/ip /"
    } | sed "s/^/$h| /"'
}

gather_facts() {
  if on_each_node "$(facts_script)"; then
    mv "$out/on_nodes.out" "$out/facts.out"
  else
    echo "$prog: could not gather the nodes' facts: $(tail -n 2 "$out/on_nodes.out" | tr '\n' ' ')" >&2
  fi
}

# snapshot_counters N: every node's counters now, in $out/counters-N.snap.
snapshot_counters() {
  if on_each_node "$(counter_snapshot_script)"; then
    mv "$out/on_nodes.out" "$out/counters-$1.snap"
  else
    : >"$out/counters-$1.snap"
  fi
}

# judge_counters FAMILY CHECK BEFORE AFTER: the check fails when an error
# counter grew between the two snapshots; what grew goes into its detail.
judge_counters() {
  python3 "$top/scripts/hwcheck_counters.py" judge "$out" "$1" "$2" \
    "$out/counters-$3.snap" "$out/counters-$4.snap" || {
    status=1
    echo "$prog: FAIL: $1 $2: error counters grew (see the report)" >&2
  }
}
