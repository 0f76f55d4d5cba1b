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
