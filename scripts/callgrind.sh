#!/bin/sh
# Instruction counts of the poll loops, mlx5direct against rdma-core's libmlx5, with valgrind's
# callgrind: counted instructions do not move with noise, load or CPU frequency.
#   sh scripts/callgrind.sh [BUILD]          (BUILD defaults to build; output in $BUILD/bench/callgrind)
# Both programs run on the emulator with the same rings (a CQ + UC QP of 1024 entries filled with
# RESP_WR_IMM CQEs by mlxd_emu_bench_write_imm) and the same call counts; the inclusive
# instructions of these never-inlined wrappers are counted:
#   mlxd-bench:        bench_empty_poll (mlxd_cq_poll of 16, empty)   bench_drain_N (drain 1024 CQEs, N at a time)
#   mlxd-bench-verbs:  verbs_empty_poll (ibv_poll_cq of 16, empty)    verbs_drain_N (ibv_poll_cq)
#                      verbs_empty_start_poll (ibv_start_poll, empty) verbs_xdrain_N (start/next/end_poll)
# Calls: empty 10000 warm-up + 100 samples x 100 = 20000; drains 3 passes + 2 warm-up = 5 x 1024 CQEs.
set -e
B=${1:-build}
OUT=${MLXD_CALLGRIND_OUT:-$B/bench/callgrind}
command -v valgrind >/dev/null 2>&1 || { echo "callgrind.sh: valgrind is missing (sh scripts/deps.sh all)" >&2; exit 1; }
mkdir -p "$OUT"
EMU="$(cd "$B/lib" && pwd)/libmlx5direct-emu.so"
EMPTY_CALLS=20000
CQES=5120
n=$(( $$ % 200 + 20 ))

toggles_mlxd="--toggle-collect=bench_empty_poll"
toggles_verbs="--toggle-collect=verbs_empty_poll --toggle-collect=verbs_empty_start_poll"
for b in 1 4 16 64; do
    toggles_mlxd="$toggles_mlxd --toggle-collect=bench_drain_$b"
    toggles_verbs="$toggles_verbs --toggle-collect=verbs_drain_$b --toggle-collect=verbs_xdrain_$b"
done

run() {   # name devices-octet program args...
    name=$1; oct=$2; shift 2
    # shellcheck disable=SC2086
    MLXD_BENCH_EMULATED=1 MLXD_EMU_SPIN_US=0 \
    MLXD_EMU_DEVICES="mlx5_0:127.8.$oct.1:mtu=4096,mlx5_1:127.8.$oct.2:mtu=4096" LD_PRELOAD="$EMU" \
        valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.cg" "$@" >"$OUT/$name.log" 2>&1 || {
        echo "callgrind.sh: $name failed under valgrind:" >&2; tail -20 "$OUT/$name.log" >&2; return 1; }
}
# shellcheck disable=SC2086
run mlxd "$n" $toggles_mlxd "$B/bin/mlxd-bench" -q --tests emu-ring --emu-passes 3 --emu-samples 100 --csv
# shellcheck disable=SC2086
verbs_ok=1
run verbs "$((n + 1))" $toggles_verbs "$B/bin/mlxd-bench-verbs" --csv --passes 3 --samples 100 || verbs_ok=0
# libmlx5 without its CQ spin lock (MLX5_SINGLE_THREADED=1, rdma-core's documented knob): the
# fairest comparison with a poll loop that has no lock
st_ok=1
MLX5_SINGLE_THREADED=1 run verbs-st "$((n + 2))" $toggles_verbs "$B/bin/mlxd-bench-verbs" --csv --passes 3 --samples 100 || st_ok=0
if grep -q '^unavailable,' "$OUT/verbs.log" 2>/dev/null; then
    echo "callgrind.sh: libmlx5 side unavailable: $(grep '^unavailable,' "$OUT/verbs.log" | head -1 | cut -d, -f2-)"
fi

ir() {    # file function -> inclusive Ir
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
        awk -v f="$2" '{ for (i = 2; i <= NF; i++) if ($i ~ (":" f "$") || $i == f) { gsub(",", "", $1); print $1; exit } }'
}
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == 0) print "-"; else printf "%.1f", a / b }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }

{
echo "# instructions (callgrind, inclusive), mlx5direct vs rdma-core libmlx5, same emulated rings"
echo "# ratio = mlx5direct / libmlx5; pc = ibv_poll_cq, np = ibv_start_poll/next_poll/end_poll; st = MLX5_SINGLE_THREADED=1 (no CQ lock)"
printf "%-22s %10s %10s %10s %10s %10s %8s %8s %8s %8s\n" "#what" "mlx5direct" "poll_cq" "next_poll" "poll_cq_st" "next_st" \
    "r_pc" "r_np" "r_pc_st" "r_np_st"
line() {  # label mlxd-fn verbs-fn xverbs-fn calls
    m=$(per "$(ir "$OUT/mlxd.cg" "$2")" "$5")
    v=- x=- vs=- xs=-
    if [ $verbs_ok = 1 ]; then v=$(per "$(ir "$OUT/verbs.cg" "$3")" "$5"); x=$(per "$(ir "$OUT/verbs.cg" "$4")" "$5"); fi
    if [ $st_ok = 1 ]; then vs=$(per "$(ir "$OUT/verbs-st.cg" "$3")" "$5"); xs=$(per "$(ir "$OUT/verbs-st.cg" "$4")" "$5"); fi
    printf "%-22s %10s %10s %10s %10s %10s %8s %8s %8s %8s\n" "$1" "$m" "$v" "$x" "$vs" "$xs" \
        "$(ratio "$m" "$v")" "$(ratio "$m" "$x")" "$(ratio "$m" "$vs")" "$(ratio "$m" "$xs")"
}
line "empty poll (per call)" bench_empty_poll verbs_empty_poll verbs_empty_start_poll $EMPTY_CALLS
for b in 1 4 16 64; do
    line "batch $b (per CQE)" bench_drain_$b verbs_drain_$b verbs_xdrain_$b $CQES
done
} | tee "$OUT/instructions.txt"
echo "callgrind.sh: wrote $OUT/instructions.txt (raw: $OUT/*.cg, callgrind_annotate --inclusive=yes)"
