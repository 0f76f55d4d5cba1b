#!/bin/sh
# make bench: every figure of docs/performance.md in one run, against rdma-core's libmlx5 where
# there is one to compare with.  Sections, in order (each writes its file under <out>):
#   1. timings (mlxd-bench on the emulator)                  bench.txt, bench.json, bench.csv
#   2. their spread over MLXD_BENCH_RUNS runs (default 3)    spread.txt, run<i>.csv
#   3. replay throughput                                     replay.txt
#   4. the emulator's end-to-end Gb/s                        e2e.txt
#   5. system calls per frame, per thread, per consumer style  syscalls.txt
#   6. the NIC-to-host delay distribution                    nic_to_host.txt
#   7. compressed CQEs                                       compressed_cqe.txt
#   8. the hand-off latency plot (gnuplot)                   handoff.png
#   9. instructions per CQE against libmlx5 (callgrind)      callgrind/instructions.txt
#  10. the summary: one line per figure, and what was unavailable and why   summary.txt
# A part whose tool is missing (gnuplot, valgrind, libmlx5, the test runner) is reported as
# unavailable, with the reason, and the others still run: the exit status is 0 then.  It is 1
# only when a part that could run failed.
#   sh scripts/bench.sh [BUILD]        BUILD defaults to build; output in $BUILD/bench
#   MLXD_BENCH_ARGS="--quick"          extra mlxd-bench options (see mlxd-bench --help)
#   MLXD_BENCH_RUNS=N                  runs of mlxd-bench for the spread (default 3)
#   MLXD_BENCH_OUT=DIR                 output directory
# docs/performance.md explains every figure.
set -u
B=${1:-build}
OUT=${MLXD_BENCH_OUT:-$B/bench}
BIN="$B/bin/mlxd-bench"
[ -x "$BIN" ] || { echo "bench.sh: $BIN is missing (make BUILD=$B)" >&2; exit 1; }
mkdir -p "$OUT"
: > "$OUT/unavailable.txt"
: > "$OUT/failed.txt"
unavailable() { echo "  $1: unavailable: $2" | tee -a "$OUT/unavailable.txt"; }
failed() { echo "  $1: FAILED: $2" | tee -a "$OUT/failed.txt"; }
section() { echo; echo "== $1"; }

load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null; }
echo "machine: $(nproc) CPUs; $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1); $(uname -sr); load average $(load)"

# --- 1. timings ---------------------------------------------------------------------------------
section "1. timings (mlxd-bench on the emulator; docs/performance.md, \"What is measured\")"
# shellcheck disable=SC2086
if ! "$BIN" -q --plot-dir "$OUT" --json-out "$OUT/bench.json" --csv-out "$OUT/bench.csv" ${MLXD_BENCH_ARGS:-} \
        > "$OUT/bench.txt" 2>&1; then
    failed "timings" "mlxd-bench exited non-zero (its output: $OUT/bench.txt)"
fi
cat "$OUT/bench.txt"

# --- 2. spread ----------------------------------------------------------------------------------
# MLXD_BENCH_RUNS runs in all (default 3), the first being the one above; per figure the smallest,
# middle and largest of the runs' typical values (t_typical: the median of a run).
RUNS=${MLXD_BENCH_RUNS:-3}
section "2. spread over $RUNS runs of the typical value (t_typical, the median) of each figure: min / middle / max  (max/min)"
cp "$OUT/bench.csv" "$OUT/run1.csv" 2>/dev/null || : > "$OUT/run1.csv"
i=2
while [ "$i" -le "$RUNS" ]; do
    # shellcheck disable=SC2086
    "$BIN" -q --csv ${MLXD_BENCH_ARGS:-} > "$OUT/run$i.csv" 2>/dev/null || failed "timings, run $i" "mlxd-bench exited non-zero"
    i=$((i + 1))
done
for f in "$OUT"/run*.csv; do
    awk -F, '$1 == "e2e" { if ($2 != "mode") print "e2e_" $2 "_" $3 ",Gb/s," $8; next }
             NR > 1 && $5 != "" && $5 != "t_typical" { print $1 "," $2 "," $5 }' "$f"
done |
    sort -t, -k1,1 -k3,3g | awk -F, '
        { v[$1, ++n[$1]] = $3; u[$1] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
        END { for (j = 1; j <= k; j++) { t = order[j]; c = n[t]; lo = v[t, 1]; hi = v[t, c]; mid = v[t, int((c + 1) / 2)]
                  printf "  %-24s %10.3f / %10.3f / %10.3f %-7s (%.2fx)\n", t, lo, mid, hi, u[t], (lo > 0 ? hi / lo : 0) } }' |
    tee "$OUT/spread.txt"

# --- 3. replay ----------------------------------------------------------------------------------
# Replay throughput against issue 16's goal (a benchmark figure, never a timed test): the
# consumer draining a detached ring the replay feeder fills, at batch 16 and above.
section "3. replay throughput (consumer on one core, feeder on another; goal: 200 M CQE/s at batch >= 16)"
if grep -q '^  replay_batch' "$OUT/spread.txt" 2>/dev/null; then
    awk '$1 ~ /^replay_batch/ { b = substr($1, 13) + 0; if (b < 16) next
             printf "  batch %-3d %8.1f M CQE/s (runs: %s to %s)  %s\n", b, $4, $2, $6,
                    ($4 >= 200 ? "goal met" : sprintf("%.0f%% of the goal", 100 * $4 / 200)) }' \
        "$OUT/spread.txt" | tee "$OUT/replay.txt"
else
    unavailable "replay throughput" "no replay figures in mlxd-bench's output (--tests without replay?)"
fi

# --- 4. end to end ------------------------------------------------------------------------------
# The generator, the emulated wire and the receiver on this machine: Gb/s of frame data per frame
# size, each run, per <monitor>/<consumer> (busy/nap, event/nap: docs/performance.md "e2e"; the
# generator paced by the consumer, so sent = received unless a cause is named in bench.txt).
section "4. the emulator end to end (generator -> emulated UDP wire -> receiver; <monitor>/<consumer>; goal 10 Gb/s with 64 KiB frames)"
if grep -q '^e2e,[a-z]' "$OUT"/run*.csv 2>/dev/null; then
    for f in "$OUT"/run*.csv; do
        awk -F, -v run="$(basename "$f" .csv)" '$1 == "e2e" && $2 != "mode" {
            printf "%s %s %s %s %s %s\n", $2, $3, run, $8, $4, $5 }' "$f"
    done | sort -k1,1 -k2,2n -k3,3 | awk '
        { key = $1 " " $2; if (key != last) { if (last != "") print line; last = key
              line = sprintf("  %-10s %8s B frames: Gb/s", $1, $2) }
          line = line sprintf("  %s %.2f (%s/%s frames)", $3, $4, $6, $5) }
        END { if (last != "") print line }' | tee "$OUT/e2e.txt"
else
    unavailable "end to end" "no e2e figures in mlxd-bench's output (--tests without e2e, or --no-emulate)"
fi

# --- 5. system calls per frame ------------------------------------------------------------------
# The test runner's counting cases (tests/test_bench.c: seccomp user notification per thread,
# exact), which print their counts; make test asserts their bounds.
section "5. system calls per frame, per thread, for each consumer style (tests/test_bench.c; make test asserts the bounds)"
if [ -x "$B/tests/mlxd-tests" ]; then
    : > "$OUT/syscalls.txt"
    for c in zero_syscalls_allocs_busy syscalls_waiting_consumer_busy syscalls_waiting_consumer_event; do
        if ! CK_RUN_SUITE=bench CK_RUN_CASE=$c CK_VERBOSITY=normal MLXD_BUILD="$B" "$B/tests/mlxd-tests" \
                > "$OUT/syscalls_$c.log" 2>&1; then
            failed "system calls, $c" "$(grep -m1 ':[FE]:' "$OUT/syscalls_$c.log" || tail -1 "$OUT/syscalls_$c.log")"
        fi
        sed -n 's/^bench: /  /p' "$OUT/syscalls_$c.log" | tee -a "$OUT/syscalls.txt"
    done
else
    unavailable "system calls per frame" "the test runner $B/tests/mlxd-tests is not built (make $B/tests/mlxd-tests)"
fi

# --- 6. NIC-to-host delay -----------------------------------------------------------------------
# mlxd-capture receiving generated frames on the emulator: per frame, the host's CLOCK_REALTIME
# when get_next_frame returned minus nic_ns, the NIC's completion time (the CQE timestamp in ns;
# docs/receiver.md).  On the emulator the NIC's clock is the host's own clock.
section "6. NIC-to-host delay (mlxd-capture --generate: received - nic_ns per frame; the emulator's NIC clock is the host's)"
if [ -x "$B/bin/mlxd-capture" ]; then
    LD_PRELOAD='' "$B/bin/mlxd-capture" --generate -n 2000 --frame-size 65536 --pages 16 --fps 2000 -q \
        > "$OUT/nic_to_host.log" 2>&1 || true
    grep -E '^NIC-to-host|^summary' "$OUT/nic_to_host.log" | sed 's/^/  /' | tee "$OUT/nic_to_host.txt"
    grep -q '^  NIC-to-host' "$OUT/nic_to_host.txt" ||
        failed "NIC-to-host delay" "mlxd-capture printed no distribution: $(tail -1 "$OUT/nic_to_host.log")"
else
    unavailable "NIC-to-host delay" "$B/bin/mlxd-capture is not built"
fi

# --- 7. compressed CQEs -------------------------------------------------------------------------
# The place of the compressed-CQE figures (issue 18, item 2: per-CQE cost and CQ memory traffic
# against full CQEs, and against libmlx5 where it supports the same).  The CQE compression work
# plugs its measurement in here: it prints its figures and writes them to
# $OUT/compressed_cqe.txt, whose first line goes into the summary (section 10); a part it cannot
# measure goes to `unavailable "compressed CQEs, <what>" "<why>"`, a failure to `failed`.  Until
# then it says why not.
# Time and CQ bytes read per completion, the same stream as full CQEs and as compressed sessions
# of 64 mini-CQEs (mlxd-bench --tests cqe-comp; its instructions are in section 9's callgrind
# block; libmlx5 has no counterpart: its poll does not expand compressed CQEs).
compressed_cqe_section() {
    if ! grep -q '^  cqe_' "$OUT/spread.txt" 2>/dev/null; then
        unavailable "compressed CQEs" "no cqe-comp figures in mlxd-bench's output (--tests without cqe-comp?)"
        return 0
    fi
    awk '$1 ~ /^cqe_(full|compressed)_/ { printf "  %-24s %s %s (runs: %s to %s)\n", $1, $4, $7, $2, $6 }' \
        "$OUT/spread.txt" | tee "$OUT/compressed_cqe.txt"
    echo "  (instructions per completion, compressed against full: section 9, callgrind/cqe_comp.txt)" | tee -a "$OUT/compressed_cqe.txt"
}
section "7. compressed CQEs (issue 18, item 2)"
: > "$OUT/compressed_cqe.txt"
compressed_cqe_section

# --- 8. the plot --------------------------------------------------------------------------------
section "8. hand-off latency plot"
plot() {
if ! command -v gnuplot >/dev/null 2>&1; then
    unavailable "hand-off plot" "gnuplot is missing (Debian: sh scripts/deps.sh bench installs gnuplot-nox; make bench runs it)"
    return 0
fi
plots=""
for m in busy event; do
    [ -s "$OUT/handoff_$m.dat" ] && plots="$plots $m"
done
if [ -z "$plots" ]; then
    unavailable "hand-off plot" "no hand-off samples (the hand-off tests did not run)"
    return 0
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
    gnuplot "$OUT/handoff.gp" 2>"$OUT/gnuplot.err" || { failed "hand-off plot" "gnuplot: $(head -1 "$OUT/gnuplot.err")"; return 0; }
fi
echo "  wrote $OUT/handoff.png (hand-off latency CDF and histogram)"
}
plot

# --- 9. instructions ----------------------------------------------------------------------------
# noise-free ratios against libmlx5 (callgrind), when valgrind is there
section "9. instructions per CQE against libmlx5 (callgrind; counted instructions do not move with load)"
if command -v valgrind >/dev/null 2>&1 && command -v callgrind_annotate >/dev/null 2>&1; then
    MLXD_CALLGRIND_OUT="$OUT/callgrind" sh "$(dirname "$0")/callgrind.sh" "$B" ||
        failed "instruction counts" "scripts/callgrind.sh exited non-zero (logs: $OUT/callgrind/*.log)"
    if grep -q 'libmlx5 side unavailable\|target per CQE.*unavailable' "$OUT/callgrind/instructions.txt" 2>/dev/null; then
        unavailable "libmlx5 comparison" "mlxd-bench-verbs could not use libmlx5 (see $OUT/callgrind/verbs.log)"
    fi
else
    unavailable "instruction counts" "valgrind is missing (sh scripts/deps.sh bench)"
fi

# --- 10. summary --------------------------------------------------------------------------------
section "10. summary ($(nproc) CPUs shared with whatever else runs: load average now $(load))"
{
    t=$(grep -h '^# target per CQE' "$OUT/callgrind/instructions.txt" 2>/dev/null | sed 's/^# //')
    echo "  instructions: ${t:-unavailable (below)}"
    awk '$1 ~ /^handoff_busy$/ { printf "  hand-off, busy-poll: median over runs %.0f ns (runs %.0f to %.0f)\n", $4, $2, $6 }' "$OUT/spread.txt" 2>/dev/null
    awk '$1 ~ /^e2e_[a-z]+\/[a-z]+_65536$/ { m = substr($1, 5, length($1) - 10)
             printf "  end to end, 64 KiB frames, %s: %.2f Gb/s (runs %.2f to %.2f; goal 10)\n", m, $4, $2, $6 }' "$OUT/spread.txt" 2>/dev/null
    sed -n 's/^  NIC-to-host delay/  NIC-to-host delay/p' "$OUT/nic_to_host.txt" 2>/dev/null
    sed -n 's/^  \(busy-poll mode, consumer spinning\)[^:]*: \(.*\)/  system calls, \1: \2/p;
            s/^  \(busy-poll mode, consumer waiting\)[^:]*: \(monitor [0-9.]*\).*\(consumer [0-9.]*\).*/  system calls, \1: \2, \3 per frame/p;
            s/^  event mode: the monitor.s calls at the kernel interface: \([0-9.]*\) per frame.*/  system calls, event mode: \1 per frame at the kernel interface (monitor)/p' \
        "$OUT/syscalls.txt" 2>/dev/null
    c=$(grep -v '^ *$' "$OUT/compressed_cqe.txt" 2>/dev/null | head -1)
    echo "  compressed CQEs: ${c:-unavailable (below)}"
    if [ -s "$OUT/unavailable.txt" ]; then echo "  unavailable parts:"; sed 's/^/  /' "$OUT/unavailable.txt"; fi
    if [ -s "$OUT/failed.txt" ]; then echo "  FAILED parts:"; sed 's/^/  /' "$OUT/failed.txt"; fi
} | tee "$OUT/summary.txt"
echo "bench.sh: wrote $OUT/ (summary.txt, bench.txt, spread.txt, e2e.txt, syscalls.txt, nic_to_host.txt, callgrind/instructions.txt, ...)"
[ -s "$OUT/failed.txt" ] && exit 1
exit 0
