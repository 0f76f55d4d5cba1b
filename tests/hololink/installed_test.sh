#!/bin/sh
# The "Done when" of docs/hololink.md, as a new user would do it: install mlx5direct to a
# temporary PREFIX, build tests/hololink/seed_app.cpp (the seed's interface alone) with
#   g++ seed_app.cpp $(pkg-config --cflags --libs mlx5direct-hololink)
# run it on the emulator (LD_PRELOAD of the installed libmlx5direct-emu.so), and replay
# fixtures/roce-pcaps/hsb_medium_64k_4pages.pcap into it from another process (hsb_feed, which
# plays the sensor bridge programmed with the QP, rkey and address the application printed).
# Passes when the application received all 20 frames with their payload intact.
#   sh tests/hololink/installed_test.sh BUILD_DIR
set -u
B=${1:-build}
CXX=${CXX:-g++}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mlxd-hololink.XXXXXX")
app_pid=
cleanup() { [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "hololink-installed-test: FAILED: $*" >&2; for f in "$tmp"/*.log; do [ -f "$f" ] && sed 's/^/  | /' "$f" >&2; done; exit 1; }

make -s --no-print-directory install BUILD="$B" PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1 ||
    fail "make install PREFIX=$tmp/prefix"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs mlx5direct-hololink) || fail "pkg-config mlx5direct-hololink"
# shellcheck disable=SC2086
$CXX -std=c++17 -Wall -Wextra -Werror -o "$tmp/seed_app" tests/hololink/seed_app.cpp $flags \
    >"$tmp/compile.log" 2>&1 || fail "compiling seed_app.cpp with: $flags"

# Coexistence with Holoscan Sensor Bridge's own module headers (docs/hololink.md): a file that
# has included one of them (its include guard is defined) cannot include ours ...
printf '#define HOLOLINK_MODULE_SERVICE_HPP 1\n#include <hololink/module/roce_receiver.hpp>\nint main() { return 0; }\n' \
    >"$tmp/hsb_first.cpp"
# shellcheck disable=SC2086
if $CXX -std=c++17 -c -o "$tmp/hsb_first.o" "$tmp/hsb_first.cpp" $(pkg-config --cflags mlx5direct-hololink) \
    >"$tmp/coexist.log" 2>&1; then
    fail "a file with Holoscan Sensor Bridge's service.hpp included compiled against ours"
fi
grep -q "Holoscan Sensor Bridge's own hololink/module headers are already included" "$tmp/coexist.log" ||
    fail "no clear message when Holoscan Sensor Bridge's header came first"
# ... and a second definition of one of the classes after ours is refused as ambiguous
printf '#include <hololink/module/roce_receiver.hpp>\nnamespace hololink::module { class ServiceBase {}; }\nint main() { hololink::module::ServiceBase *p = nullptr; return p != nullptr; }\n' \
    >"$tmp/ours_first.cpp"
# shellcheck disable=SC2086
if $CXX -std=c++17 -c -o "$tmp/ours_first.o" "$tmp/ours_first.cpp" $(pkg-config --cflags mlx5direct-hololink) \
    >"$tmp/coexist.log" 2>&1; then
    fail "a second hololink::module::ServiceBase after ours compiled"
fi
grep -q "ambiguous" "$tmp/coexist.log" || fail "a second ServiceBase after ours is not reported as ambiguous"
rm -f "$tmp/coexist.log"

# private emulated devices (as tests/util.c does), MTU 4096 for the capture's 1408-byte payloads
a=$(( 20 + $$ % 200 )); b=$(( 1 + ($$ / 200) % 250 ))
port_ip="127.$a.$b.1"
export MLXD_EMU_DEVICES="mlx5_0:$port_ip:mtu=4096,mlx5_1:127.$a.$b.2:mtu=4096"
LD_PRELOAD="$tmp/prefix/lib/libmlx5direct-emu.so" LD_LIBRARY_PATH="$tmp/prefix/lib" \
    "$tmp/seed_app" mlx5_0 127.0.0.1 65536 69632 4 20 >"$tmp/app.log" 2>&1 &
app_pid=$!
i=0
until grep -q '^program ' "$tmp/app.log" 2>/dev/null; do
    kill -0 "$app_pid" 2>/dev/null || fail "seed_app ended before it printed its QP"
    i=$((i + 1)); [ $i -gt 300 ] && fail "seed_app printed no QP in 30 s"
    sleep 0.1
done
set -- $(sed -n 's/^program qp=\([0-9]*\) rkey=\([0-9]*\) address=\([0-9]*\)$/\1 \2 \3/p' "$tmp/app.log")
[ $# -eq 3 ] || fail "cannot parse the program line"
"$B/tests/progs/hsb_feed" fixtures/roce-pcaps/hsb_medium_64k_4pages.pcap "$port_ip" "$1" "$2" "$3" \
    >"$tmp/feed.log" 2>&1 || fail "hsb_feed"
wait "$app_pid"; rc=$?; app_pid=
[ $rc -eq 0 ] || fail "seed_app exit status $rc"
grep -q '^received 20 frames, 0 with a wrong payload$' "$tmp/app.log" || fail "not all 20 frames"
echo "hololink-installed-test: OK (installed headers + pkg-config; 20 of 20 replayed frames received intact; HSB headers refused in the same file)"
