#!/bin/sh
# make bench: runs mlxd-bench (tools/mlxd-bench.c) on the emulator, prints its table, writes
# <out>/bench.json, <out>/bench.csv and the hand-off latency plot <out>/handoff.png (gnuplot).
#   sh scripts/bench.sh [BUILD]        BUILD defaults to build; output in $BUILD/bench
#   MLXD_BENCH_ARGS="--quick"          extra mlxd-bench options (see mlxd-bench --help)
#   MLXD_BENCH_OUT=DIR                 output directory
# docs/performance.md explains every figure.
set -e
B=${1:-build}
OUT=${MLXD_BENCH_OUT:-$B/bench}
BIN="$B/bin/mlxd-bench"
[ -x "$BIN" ] || { echo "bench.sh: $BIN is missing (make BUILD=$B)" >&2; exit 1; }
mkdir -p "$OUT"
status=0
echo "machine: $(nproc) CPUs; $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1); $(uname -sr)"
# shellcheck disable=SC2086
"$BIN" -q --plot-dir "$OUT" --json-out "$OUT/bench.json" --csv-out "$OUT/bench.csv" $MLXD_BENCH_ARGS \
    | tee "$OUT/bench.txt"
echo
echo "bench.sh: wrote $OUT/bench.txt, $OUT/bench.json, $OUT/bench.csv"

# The spread over repeated runs (issue 18: every figure with its spread, not only one run):
# MLXD_BENCH_RUNS runs in all (default 3), the first being the one above; per figure the
# smallest, middle and largest of the runs' typical values (t_typical: the median of a run).
RUNS=${MLXD_BENCH_RUNS:-3}
cp "$OUT/bench.csv" "$OUT/run1.csv"
i=2
while [ "$i" -le "$RUNS" ]; do
    # shellcheck disable=SC2086
    "$BIN" -q --csv $MLXD_BENCH_ARGS > "$OUT/run$i.csv" 2>/dev/null || status=1
    i=$((i + 1))
done
echo
echo "spread over $RUNS runs of the typical value (t_typical) of each figure: min / middle / max  (max/min)"
for f in "$OUT"/run*.csv; do
    awk -F, '$1 == "e2e" { if ($2 != "mode") print "e2e_" $2 "_" $3 ",Gb/s," $8; next }
             NR > 1 && $5 != "" && $5 != "t_typical" { print $1 "," $2 "," $5 }' "$f"
done |
    sort -t, -k1,1 -k3,3g | awk -F, '
        { v[$1, ++n[$1]] = $3; u[$1] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
        END { for (j = 1; j <= k; j++) { t = order[j]; c = n[t]; lo = v[t, 1]; hi = v[t, c]; mid = v[t, int((c + 1) / 2)]
                  printf "  %-24s %10.3f / %10.3f / %10.3f %-7s (%.2fx)\n", t, lo, mid, hi, u[t], (lo > 0 ? hi / lo : 0) } }' |
    tee "$OUT/spread.txt"

# Replay throughput against issue 16's goal (a benchmark figure, never a timed test): the
# consumer draining a detached ring the replay feeder fills, at batch 16 and above.
if grep -q '^  replay_batch' "$OUT/spread.txt" 2>/dev/null; then
    echo
    echo "replay throughput (consumer on one core, feeder on another; goal: 200 M CQE/s at batch >= 16):"
    awk '$1 ~ /^replay_batch/ { b = substr($1, 13) + 0; if (b < 16) next
             printf "  batch %-3d %8.1f M CQE/s (runs: %s to %s)  %s\n", b, $4, $2, $6,
                    ($4 >= 200 ? "goal met" : sprintf("%.0f%% of the goal", 100 * $4 / 200)) }' \
        "$OUT/spread.txt" | tee "$OUT/replay.txt"
fi

# System calls per frame for each consumer style (issue 18): the test runner's counting cases
# (tests/test_bench.c: seccomp user notification per thread), which print their counts.
if [ -x "$B/tests/mlxd-tests" ]; then
    echo
    echo "system calls per frame, per thread (tests/test_bench.c; make test asserts the bounds):"
    for c in zero_syscalls_allocs_busy syscalls_waiting_consumer_busy syscalls_waiting_consumer_event; do
        CK_RUN_SUITE=bench CK_RUN_CASE=$c CK_VERBOSITY=silent MLXD_BUILD="$B" "$B/tests/mlxd-tests" 2>&1 \
            | sed -n 's/^bench: /  /p' || status=1
    done | tee "$OUT/syscalls.txt"
fi

# The NIC-to-host delay distribution: mlxd-capture receiving generated frames on the emulator
# (the receiver's frame info nic_ns; docs/receiver.md).
echo
LD_PRELOAD= "$B/bin/mlxd-capture" --generate -n 2000 --frame-size 65536 --pages 16 --fps 2000 -q 2>&1 \
    | grep -E '^NIC-to-host|^summary' | tee "$OUT/nic_to_host.txt"

# The plot, then the instruction counts: a missing tool skips its part only (and makes the exit
# status non-zero at the end), never the other part.
plot() {
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "bench.sh: gnuplot is missing: no plot (Debian: sh scripts/deps.sh bench installs gnuplot-nox; make bench runs it)" >&2
    return 1
fi
plots=""
for m in busy event; do
    [ -s "$OUT/handoff_$m.dat" ] && plots="$plots $m"
done
if [ -z "$plots" ]; then
    echo "bench.sh: no hand-off samples to plot (the hand-off tests did not run)" >&2
    return 1
fi
# CDF (log x) of both modes, and a histogram of the busy-poll samples (5 ns bins up to 1.5 x p99)
{
    echo "set terminal pngcairo size 1200,500 noenhanced font ',10'"
    echo "set output '$OUT/handoff.png'"
    echo "set multiplot layout 1,2 title 'mlx5direct hand-off latency: CQE valid in the ring -> get_next_frame returns (emulator)'"
    echo "set logscale x; set grid; set xlabel 'ns'; set ylabel 'fraction of frames <= x'; set key bottom right"
    echo "set yrange [0:1]"
    sep="plot"
    for m in $plots; do
        printf "%s '%s/handoff_%s.dat' using 1:2 with lines lw 2 title '%s'" "$sep" "$OUT" "$m" "$m"
        sep=","
    done
    echo
    echo "unset logscale x; set autoscale; set xlabel 'ns (busy-poll; bins of 5 ns, up to 1.5 x p99)'; set ylabel 'frames'"
    xmax=$(awk '!/^#/ && $2 <= 0.99 { x = $1 } END { print (x > 0 ? x * 1.5 : 1000) }' "$OUT/handoff_busy.dat")
    echo "set xrange [0:$xmax]"
    echo "bin(x) = 5 * floor(x / 5)"
    echo "plot '$OUT/handoff_busy.dat' using (bin(\$1)):(1) smooth frequency with boxes fill solid 0.5 title 'busy-poll'"
    echo "unset multiplot"
} > "$OUT/handoff.gp"
if ! gnuplot "$OUT/handoff.gp" 2>"$OUT/gnuplot.err"; then
    # pngcairo is in gnuplot-nox on Debian; fall back to the plain png terminal
    sed -i 's/pngcairo size 1200,500 noenhanced font .,10./png size 1200,500/' "$OUT/handoff.gp"
    gnuplot "$OUT/handoff.gp" || { cat "$OUT/gnuplot.err" >&2; return 1; }
fi
echo "bench.sh: wrote $OUT/handoff.png (hand-off latency CDF and histogram)"
}
plot || status=1

# instruction counts (noise-free ratios against libmlx5), when valgrind is there
if command -v valgrind >/dev/null 2>&1; then
    echo
    MLXD_CALLGRIND_OUT="$OUT/callgrind" sh "$(dirname "$0")/callgrind.sh" "$B" || status=1
else
    echo "bench.sh: valgrind is missing: no instruction counts (sh scripts/deps.sh bench)" >&2
    status=1
fi
exit $status
