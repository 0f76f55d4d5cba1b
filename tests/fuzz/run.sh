#!/bin/sh
# tests/fuzz/run.sh BUILD SECONDS TARGET...: runs each libFuzzer target for SECONDS seconds on
# its corpus (BUILD/fuzz-corpus/<target>, kept between runs), seeded from tests/fuzz/corpus/<target>
# and from fixtures/ (made at run time).  Prints one line per target with the execution count
# and rate; exits non-zero if any target found a crash, hang, leak or sanitizer report (the
# reproducer is left in BUILD/fuzz-artifacts/<target>/).
set -u
B=$1; S=$2; shift 2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
export MLXD_SRC="$SRC"
fail=0
for t in "$@"; do
  bin="$B/fuzz/$t"; corp="$B/fuzz-corpus/$t"; seeds="$B/fuzz-seeds/$t"; art="$B/fuzz-artifacts/$t/"
  rm -rf "$seeds"; mkdir -p "$corp" "$seeds" "$art"
  [ -d "$SRC/tests/fuzz/corpus/$t" ] && cp "$SRC/tests/fuzz/corpus/$t"/* "$seeds"/ 2>/dev/null
  maxlen=4096
  case $t in
    fuzz_cqe_dump) cp "$SRC"/fixtures/cqe-dumps/*.txt "$seeds"/ ;;
    fuzz_pcap|fuzz_capture) for p in "$SRC"/fixtures/roce-pcaps/*.pcap "$SRC"/fixtures/crafted-pcaps/*.pcap; do
                 [ "$(wc -c < "$p")" -le 32768 ] && cp "$p" "$seeds"/; done; maxlen=32768 ;;
    fuzz_roce|fuzz_hsb|fuzz_wire|fuzz_ioctl|fuzz_poll|fuzz_cqe_mini)
      MLXD_FUZZ_MKSEEDS="$seeds" "$bin" >/dev/null 2>"$B/fuzz-seeds/$t.log" ||
        { echo "fuzz: $t: seed generation failed:"; cat "$B/fuzz-seeds/$t.log"; fail=1; continue; }
      [ $t = fuzz_wire ] && maxlen=12288 ;;
  esac
  extra=""
  # fuzz_wire keeps the driver's QPs, CQ and regions across inputs: libFuzzer's per-input leak
  # check would flag them; LeakSanitizer still runs at exit.
  [ $t = fuzz_wire ] && extra="-detect_leaks=0"
  log="$B/fuzz-$t.log"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" -max_total_time="$S" -timeout=10 -rss_limit_mb=2048 -max_len=$maxlen \
      -print_final_stats=1 $extra -artifact_prefix="$art" "$corp" "$seeds" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^stat::.*//;s/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    fail=1
    echo "fuzz: $t: FAILED (exit $rc) after ${runs:-?} runs; log $log; reproducer in $art"
    grep -m3 -E 'ERROR|runtime error|SUMMARY|fuzz_[a-z]*:' "$log" | sed 's/^/    /'
  else
    echo "fuzz: $t: ${runs:-?} executions in ${secs:-$S} s (${rate:-?}/s), $cov, no finding"
  fi
done
exit $fail
