#!/bin/sh
# make demo: the main job.  For now: decode every real error CQE in fixtures/cqe-dumps/ with
# mlxd-cqe (the receiver demo will replace this).  Usage: scripts/demo.sh BUILD_DIR
set -e
build=${1:?usage: scripts/demo.sh BUILD_DIR}
cd "$(dirname "$0")/.."
tool="$build/bin/mlxd-cqe"
[ -x "$tool" ] || { echo "demo: $tool is not built (run make)" >&2; exit 1; }
n=0
for f in fixtures/cqe-dumps/*.txt; do
  echo "=== $f"
  sed -n 's/^# \(source\|cause as stated in the thread\): /    \1: /p' "$f"
  "$tool" "$f"
  n=$((n + 1))
done
echo "demo: decoded the error CQEs of $n public bug reports (docs/cqe-tool.md explains the fields)"
