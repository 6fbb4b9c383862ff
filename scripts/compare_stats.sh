# shellcheck shell=bash disable=SC2154  # out_dir: compare.sh's
# Sourced by scripts/compare.sh: the statistics over its rounds.
#
# $out_dir/FAMILY.data holds one line per run and size:
#   MODE SIZE AVG ROUND POSITION
# MODE: pmpi (the MPI alone), mlxa2a, or control (mlxa2a preloaded with
# MLXA2A_TUNE=pmpi: every call passes through to PMPI_Alltoall); POSITION: the
# run's place in its round (the order rotates from round to round).
#
# The ratio of a mode is median(MODE) / median(pmpi) over rounds. The noise
# band of a table is the control's "ctl-spread": the largest |control / pmpi
# - 1| of the per-round ratios (each round's control run over the same
# round's run without mlxa2a). The control changes nothing but the shim's
# presence, so a ratio within 1 +- ctl-spread is within what the same MPI
# against itself showed in this run; with few rounds it is a lower bound.

# awk: reads the data lines into vals[MODE,SIZE,k] and round_val[MODE,SIZE,
# ROUND]; median(), lo() and hi() over the k of a key; ratios(MODE, SIZE)
# puts the per-round MODE / pmpi ratios under the key it returns; spread(KEY)
# is their largest distance from 1; has(MODE, SIZE) whether MODE ran.
# shellcheck disable=SC2016  # awk's own $1..$5
awk_stats='
  function sorted(key,   n, i, j, t) {
    n = count[key]
    for (i = 1; i <= n; i++) v[i] = vals[key, i]
    for (i = 2; i <= n; i++)                # insertion sort: n is small
      for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n
  }
  function median(key,   n) { n = sorted(key); return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
  function lo(key) { sorted(key); return v[1] }
  function hi(key) { return v[sorted(key)] }
  function has(mode, s) { return count[mode SUBSEP s] > 0 }
  function ratios(mode, s,   rk, n, r, off, on) {
    rk = mode "/pmpi" SUBSEP s; n = 0
    for (r = 1; r <= nrounds; r++) {
      off = round_val["pmpi", s, rounds[r]]; on = round_val[mode, s, rounds[r]]
      if (off > 0 && on != "") vals[rk, ++n] = on / off
    }
    count[rk] = n
    return rk
  }
  function spread(rk,   i, d, m) {
    m = 0
    for (i = 1; i <= count[rk]; i++) { d = vals[rk, i] - 1; if (d < 0) d = -d; if (d > m) m = d }
    return m
  }
  function ratio_of_medians(mode, s,   off) {
    off = median("pmpi" SUBSEP s)
    return off > 0 && has(mode, s) ? median(mode SUBSEP s) / off : ""
  }
  { key = $1 SUBSEP $2; vals[key, ++count[key]] = $3; round_val[$1, $2, $4] = $3
    if (!($4 in rseen)) { rseen[$4] = 1; rounds[++nrounds] = $4 }
    if (!($2 in seen)) { seen[$2] = 1; order[++nsizes] = $2 } }
'

# summary_data FAMILY: writes the plot data of one family (compare_plot.gp's
# columns): per size the median, min and max over rounds without and with
# mlxa2a, the table's ratio (of the medians), the min and max of the
# per-round ratios, then the control's ratio (of the medians) and the min and
# max of its per-round ratios (NaN without a control).
summary_data() {
  awk "$awk_stats"'
    function nan_or(x, fmt) { return x == "" ? "NaN" : sprintf(fmt, x) }
    END {
      for (i = 1; i <= nsizes; i++) {
        s = order[i]; rk = ratios("mlxa2a", s); ck = ratios("control", s)
        printf "%s %g %g %g %g %g %g", s, median("pmpi" SUBSEP s), lo("pmpi" SUBSEP s), hi("pmpi" SUBSEP s),
               median("mlxa2a" SUBSEP s), lo("mlxa2a" SUBSEP s), hi("mlxa2a" SUBSEP s)
        # Full precision: a reader rounding to the two places of the table then
        # gets its figure (4 places rounded again could differ).
        printf " %s", nan_or(ratio_of_medians("mlxa2a", s), "%.17g")   # the table'"'"'s ratio
        if (count[rk] > 0) printf " %g %g", lo(rk), hi(rk); else printf " NaN NaN"
        printf " %s", nan_or(ratio_of_medians("control", s), "%.17g")
        if (count[ck] > 0) printf " %g %g\n", lo(ck), hi(ck); else printf " NaN NaN\n"
      }
    }' "$out_dir/$1.data" >"$out_dir/$1.plot"
}

# table_rows FAMILY: the table's header line and one line per size:
#   # Size  PMPI(us)  mlxa2a(us)  ratio  [control  ctl-spread]
# (the control's columns when its runs are in the data).
table_rows() {
  awk "$awk_stats"'
    function two(x) { return x == "" ? "-" : sprintf("%.2f", x) }
    END {
      ctl = has("control", order[1])
      printf "%-10s%16s%16s%12s", "# Size", "PMPI(us)", "mlxa2a(us)", "ratio"
      if (ctl) printf "%10s%12s", "control", "ctl-spread"
      printf "\n"
      for (i = 1; i <= nsizes; i++) {
        s = order[i]
        printf "%-10s%16.2f%16.2f%12s", s, median("pmpi" SUBSEP s), median("mlxa2a" SUBSEP s),
               two(ratio_of_medians("mlxa2a", s))
        if (ctl) {
          ck = ratios("control", s)
          printf "%10s%12s", two(ratio_of_medians("control", s)), count[ck] ? two(spread(ck)) : "-"
        }
        printf "\n"
      }
    }' "$out_dir/$1.data"
}
