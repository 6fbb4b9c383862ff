#!/bin/bash
# scripts/compare_stats.sh on made-up rounds: the plot data's ratios, rounded
# to two places, are the table's (the plot must show what the table says).
# Ratios near a rounding edge (x.xx5) caught a double rounding: the plot data
# kept 4 places and a reader's %.2f of 0.9250 gave 0.93 where the table,
# rounding 0.92496 once, said 0.92.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
# shellcheck source=scripts/compare_stats.sh
. "$top/scripts/compare_stats.sh"
failed=0
# Per size: pmpi 100 in each round; mlxa2a and control a little off a
# rounding edge (92.496 -> 0.92496, 100.4996 -> 1.004996 ...).
{
  for r in 1 2 3; do
    echo "pmpi 1 100 $r 0"; echo "mlxa2a 1 92.496 $r 1"; echo "control 1 92.4996 $r 2"
    echo "pmpi 2 100 $r 0"; echo "mlxa2a 2 100.4996 $r 1"; echo "control 2 107.4951 $r 2"
    echo "pmpi 4 1000 $r 0"; echo "mlxa2a 4 1234.9999 $r 1"; echo "control 4 995.0001 $r 2"
  done
} >"$out_dir/f.data"
summary_data f
table=$(table_rows f | awk '!/^#/ { print $1, $4, $5 }')
plotted=$(awk '{ printf "%s %.2f %.2f\n", $1, $8, $11 }' "$out_dir/f.plot")
if [ "$table" = "$plotted" ] && [ "$(wc -l <<<"$table")" = 3 ]; then
  echo "ok   plotted ratios and controls = the table's at rounding edges"
else
  echo "FAIL table:"; echo "$table"; echo "plot data:"; echo "$plotted"; failed=1
fi
echo "$((1 - failed)) passed, $failed failed"
exit "$failed"
