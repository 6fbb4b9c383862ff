# Draws what scripts/compare.sh --plot asks for: per message size, the median
# latency without mlxa2a (PMPI, dashed) and with it (solid), and their ratio,
# one colour per MPI family, each with its min-max over rounds as a band;
# with_control=1 adds the control's ratio (mlxa2a in pass-through over PMPI,
# dotted, its per-round min-max as a hatched band): the noise the ratio sits in.
#
#   gnuplot [-e with_control=1] -c scripts/compare_plot.gp OUT.png|OUT.svg TITLE DATA1 LABEL1 [DATA2 LABEL2]
#
# DATA: one line per size, written by compare.sh (summary_data):
#   bytes pmpi_med pmpi_min pmpi_max mlxa2a_med mlxa2a_min mlxa2a_max
#   ratio ratio_min ratio_max    (mlxa2a / PMPI: of the medians, as compare.sh's
#                                 table; min and max of the per-round ratios)
#   ctl ctl_min ctl_max          (control / PMPI, the same way; NaN without one)
if (ARGC < 4) { print "usage: gnuplot -c compare_plot.gp OUT TITLE DATA LABEL [DATA LABEL]"; exit status 2 }
out = ARG1
if (!exists("with_control")) with_control = 0
nctl = with_control ? 1 : 0
nfam = (ARGC >= 6) ? 2 : 1
file(i) = (i == 1) ? ARG3 : ARG5
label(i) = (i == 1) ? ARG4 : ARG6
if (out[strlen(out) - 3:] eq ".svg") {
    set terminal svg size 900,820 dynamic enhanced background rgb "white" font "sans,11"
} else {
    set terminal pngcairo size 900,820 enhanced background rgb "white" font "sans,10"
}
set output out
colour(i) = (i == 1) ? "#1f77b4" : "#d62728"

set multiplot layout 2,1 title ARG2
set logscale x 2
set format x "2^{%L}"
set xlabel "bytes per peer"
set grid
set key top left

set logscale y
set ylabel "latency (us), median over rounds"
plot for [i=1:nfam] file(i) using 1:3:4 with filledcurves lc rgb colour(i) \
         fillstyle transparent solid 0.12 notitle, \
     for [i=1:nfam] file(i) using 1:6:7 with filledcurves lc rgb colour(i) \
         fillstyle transparent solid 0.25 notitle, \
     for [i=1:nfam] file(i) using 1:2 with linespoints dt 2 pt 6 lc rgb colour(i) \
         title label(i)." without mlxa2a", \
     for [i=1:nfam] file(i) using 1:5 with linespoints dt 1 pt 7 lc rgb colour(i) \
         title label(i)." with mlxa2a"

set ylabel "ratio mlxa2a / PMPI (below 1: faster)"
set format y "%g"
plot for [i=1:nfam] file(i) using 1:9:10 with filledcurves lc rgb colour(i) \
         fillstyle transparent solid 0.2 notitle, \
     for [i=1:nfam*nctl] file(i) using 1:12:13 with filledcurves lc rgb colour(i) \
         fillstyle transparent pattern 4 notitle, \
     for [i=1:nfam] file(i) using 1:8 with linespoints pt 7 lc rgb colour(i) \
         title label(i), \
     for [i=1:nfam*nctl] file(i) using 1:11 with linespoints dt 3 pt 4 lc rgb colour(i) \
         title label(i)." control (pass-through)", \
     1 with lines dt 3 lc rgb "black" title "equal"
unset multiplot
