#!/bin/sh
# demo-capture.sh [BUILD_DIR] [CAPTURE.pcap]
# Replays a real capture of NVIDIA's sensor-bridge emulator (fixtures/roce-pcaps) through
# mlxd-capture on the emulated ConnectX and prints each frame's decoded metadata and whether its
# payload verified.  Exit status: mlxd-capture's (0 = every recorded frame received and verified).
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case "$build" in /*) ;; *) build="$here/$build" ;; esac
pcap=${2:-$here/fixtures/roce-pcaps/hsb_small_4k_3pages.pcap}
tool="$build/bin/mlxd-capture"
if [ ! -x "$tool" ]; then
    echo "demo-capture: $tool is not built (run make)" >&2
    exit 1
fi
echo "== mlxd-capture: replaying $(basename "$pcap") (recorded from NVIDIA's sensor-bridge emulator)"
echo "   into a receiver on the emulated mlx5_0; QPN, rkey and addresses are rewritten to the"
echo "   receiver's as programming the sensor bridge would do, the iCRC recomputed."
echo
set +e
"$tool" --replay "$pcap" --print-frames --quiet
rc=$?
set -e
echo
if [ $rc -eq 0 ]; then
    echo "== demo: every recorded frame was received, its metadata decoded and its payload verified"
else
    echo "== demo: FAILED (mlxd-capture exit status $rc)"
fi
exit $rc
