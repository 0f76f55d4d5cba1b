#!/bin/sh
# make demo: the main job.  Usage: scripts/demo.sh BUILD_DIR
#  1. replays a real RoCE v2 capture of NVIDIA's sensor-bridge emulator through mlxd-capture on
#     the emulated ConnectX: every frame received, its metadata decoded, its payload verified;
#  2. decodes one real error CQE from a public bug report with mlxd-cqe.
set -e
build=${1:?usage: scripts/demo.sh BUILD_DIR}
cd "$(dirname "$0")/.."
sh scripts/demo-capture.sh "$build"
echo
echo "== mlxd-cqe: an error CQE pasted into a public bug report (fixtures/cqe-dumps/spdk-500.txt)"
"$build/bin/mlxd-cqe" fixtures/cqe-dumps/spdk-500.txt
echo
echo "== demo done: see README.md for the pingpong example and the other captures"
