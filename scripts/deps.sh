#!/bin/sh
# Installs the Debian packages mlx5direct needs, if any is missing.
#   deps.sh build   what `make` needs        deps.sh test   + what `make test` runs
#   deps.sh bench   what `make bench` runs: + libmlx5 (ibverbs-providers) for the comparison,
#                   valgrind for the instruction counts, gnuplot-nox for the plots, binutils
#                   (objdump: libmlx5's valgrind annotation sites)
#   deps.sh all     everything (CI, benchmarks, cross build)
# As root it runs apt-get itself; otherwise it prints the exact command and fails.
set -e
BUILD_PKGS="gcc g++ make check pkg-config libibverbs-dev libpcap-dev zlib1g-dev"
TEST_PKGS="tshark ibverbs-utils ibverbs-providers perftest iproute2"
BENCH_PKGS="ibverbs-providers valgrind gnuplot-nox binutils"
ALL_PKGS="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross clang libclang-rt-14-dev $BENCH_PKGS"
case "${1:-build}" in
  build) want="$BUILD_PKGS" ;;
  test)  want="$BUILD_PKGS $TEST_PKGS" ;;
  bench) want="$BUILD_PKGS $BENCH_PKGS" ;;
  all)   want="$BUILD_PKGS $TEST_PKGS $ALL_PKGS" ;;
  *) echo "usage: deps.sh build|test|bench|all" >&2; exit 2 ;;
esac
command -v dpkg-query >/dev/null 2>&1 || exit 0   # not Debian: the user installs by hand
missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != 0 ]; then
  echo "mlx5direct: missing Debian packages:$missing" >&2
  echo "run as root:  apt-get update && DEBIAN_FRONTEND=noninteractive $cmd" >&2
  exit 1
fi
echo "mlx5direct: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends $missing >/dev/null
