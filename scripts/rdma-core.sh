#!/bin/sh
# scripts/rdma-core.sh: run one of rdma-core's or perftest's two-sided programs, unmodified, as
# server and client on the emulator (what two terminals would do; docs/emulator.md, "rdma-core
# compatibility").  The pair gets its own loopback addresses and TCP port, so it cannot collide
# with another run; both sides are killed after TIMEOUT seconds (default 120).
#
#   sh scripts/rdma-core.sh [-b BUILD] PROGRAM [ARGS...]
#   sh scripts/rdma-core.sh ibv_rc_pingpong -s 65536 -n 10000
#   sh scripts/rdma-core.sh ib_write_lat -s 65536
#
# Adds -d (mlx5_0 for the server, mlx5_1 for the client), -p and the GID index (-g 3 for the
# ibv_*_pingpong programs, -x 3 for perftest's ib_*).  Prints the server's then the client's
# output; exits 0 when both sides exit 0.
set -u
build=build
if [ "${1:-}" = "-b" ]; then build=$2; shift 2; fi
[ $# -ge 1 ] || { sed -n '2,14p' "$0"; exit 2; }
prog=$1; shift
lib=$(cd "$(dirname "$0")/.." && pwd)/$build/lib/libmlx5direct-emu.so
[ -f "$lib" ] || { echo "rdma-core.sh: $lib is not built (make BUILD=$build)" >&2; exit 2; }
command -v "$prog" >/dev/null || { echo "rdma-core.sh: $prog is not installed (sh scripts/deps.sh test)" >&2; exit 2; }
# a sanitizer build's emulator needs its runtime first in LD_PRELOAD (uninstrumented programs)
san=$(ldd "$lib" 2>/dev/null | awk '/lib[at]san\.so/ {print $3; exit}')
# An instrumented emulator preloaded without its runtime first crashes in libasan's own set-up
# (its mmap is the emulator's, whose instrumented code touches shadow memory not yet mapped):
# refuse rather than segfault when the runtime cannot be found (e.g. clang, ldd "not found").
if [ -z "$san" ] || [ ! -f "$san" ]; then
  if nm -D --undefined-only "$lib" 2>/dev/null | grep -q ' __[at]san_init'; then
    echo "rdma-core.sh: $lib is a sanitizer build but its runtime (libasan/libtsan) was not found by ldd; it cannot be preloaded without the runtime first (use a plain build: -b build)" >&2
    exit 2
  fi
  san=
fi
[ -n "$san" ] && { lib="$san $lib"; export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0"; }
case $prog in
  ibv_*) gid="-g 3" ;;
  ib_*)  gid="-x 3" ;;
  *)     gid="" ;;
esac
n=$$
a=$((1 + n % 250)); b=$(( (n / 250) % 256 ))
srv=127.$a.$b.1
port=$((33000 + n % 28000))
export MLXD_EMU_DEVICES="mlx5_0:$srv,mlx5_1:127.$a.$b.2"
unset SYSFS_PATH
out=$(mktemp -d "${TMPDIR:-/tmp}/rdma-core.XXXXXX")
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$out"' EXIT INT TERM
timeout "${TIMEOUT:-120}" env LD_PRELOAD="$lib" "$prog" -d mlx5_0 -p $port $gid "$@" >"$out/server" 2>&1 &
spid=$!
hex=$(printf '%04X' $port)
i=0
while [ $i -lt 200 ] && ! grep -q ":$hex 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
timeout "${TIMEOUT:-120}" env LD_PRELOAD="$lib" "$prog" -d mlx5_1 -p $port $gid "$@" $srv >"$out/client" 2>&1
crc=$?
wait $spid; src=$?
echo "=== server: $prog -d mlx5_0 -p $port $gid $* (exit $src)"; cat "$out/server"
echo "=== client: $prog -d mlx5_1 -p $port $gid $* $srv (exit $crc)"; cat "$out/client"
[ $src -eq 0 ] && [ $crc -eq 0 ]
