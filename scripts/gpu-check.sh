#!/bin/sh
# scripts/gpu-check.sh: the GPU-memory paths against a real NVIDIA driver, on a machine that has
# a GPU (docs/receiver.md, "On a real GPU").  Under 5 minutes; prints one verdict line:
#   gpu-check: PASS ...      everything below passed
#   gpu-check: PARTIAL ...   the driver side passed; the emulated NIC cannot write into this GPU's
#                            dma-buf (the driver refuses CPU mappings of device memory, as on
#                            every discrete GPU): the NIC side needs a real ConnectX
#   gpu-check: FAIL ...      the step that failed (its output is in the log named)
#   gpu-check: SKIP ...      no NVIDIA driver here (exit 2)
# Steps: build with FAKE_CUDA=0 (the test runner finds the real libcuda.so.1, not the emulated
# one); make cuda-api-check where the toolkit is installed; receiver_cuda's driver-only cases on
# the real driver (cuda_driver: attributes and the dma-buf export of cuMemAlloc memory; cuda:
# generated and replayed frames into cuMemAlloc memory through its dma-buf, registered with the
# emulated NIC, read back with cuMemcpyDtoH); then mlxd-capture --generate/--replay --gpu.
set -u
cd "$(dirname "$0")/.."
B=${GPU_CHECK_BUILD:-build-gpu}
mkdir -p "$B"
LOG=$B/gpu-check.log
: > "$LOG"
T0=$(date +%s)
say() { echo "gpu-check: $* ($(($(date +%s) - T0)) s; log $LOG)"; }

# run NAME SECONDS CMD...: one step, its output to the log
run() {
    name=$1 secs=$2
    shift 2
    echo "=== $name: $*" >> "$LOG"
    timeout "$secs" "$@" >> "$LOG" 2>&1
}

# the driver: in the loader's cache, or in LD_LIBRARY_PATH (which also lets this script be
# rehearsed on the emulated driver: LD_LIBRARY_PATH=$PWD/build/tests/fakecuda)
have_driver() {
    ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && return 0
    for d in $(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do [ -e "$d/libcuda.so.1" ] && return 0; done
    return 1
}
# which driver the runs get: a rehearsal on the emulated one says so in the verdict
DRIVER="real driver"
for d in $(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do
    if [ -e "$d/libcuda.so.1" ]; then
        grep -q fakecuda_fail "$d/libcuda.so.1" && DRIVER="EMULATED driver (a rehearsal, not a GPU check)"
        break
    fi
done
if ! have_driver; then
    say "SKIP: no libcuda.so.1 (the NVIDIA driver) on this machine"
    exit 2
fi
command -v nvidia-smi > /dev/null && run nvidia-smi 30 nvidia-smi -L

run build 150 make BUILD="$B" FAKE_CUDA=0 -j"$(nproc)" all "$B/tests/mlxd-tests" ||
    { say "FAIL: build"; exit 1; }
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ]; then
    run cuda-api-check 30 make BUILD="$B" cuda-api-check ||
        { say "FAIL: receiver/cuda_api.h differs from the toolkit's cuda.h (make cuda-api-check)"; exit 1; }
fi
suite() {
    MLXD_TEST_REAL_CUDA=1 MLXD_BUILD="$B" MLXD_SRC="$PWD" CK_RUN_SUITE=receiver_cuda CK_RUN_CASE=$1 \
        run "receiver_cuda/$1" 90 "$B/tests/mlxd-tests"
}
suite cuda_driver || { say "FAIL: the real driver's attributes or dma-buf export (receiver_cuda/cuda_driver)"; exit 1; }
if ! suite cuda; then
    if grep -q 'No such device or address' "$LOG"; then
        say "PARTIAL: $DRIVER: driver side passed (allocation, attributes, dma-buf export, contexts); the emulated NIC cannot write into this GPU's dma-buf (no CPU mapping of device memory): only a real ConnectX proves the NIC side"
        exit 0
    fi
    say "FAIL: frames into GPU memory (receiver_cuda/cuda)"
    exit 1
fi
run capture-generate 60 "$B/bin/mlxd-capture" --generate --gpu -n 300 --fps 200 --pages 8 --queue-size 8 -q ||
    { say "FAIL: mlxd-capture --generate --gpu"; exit 1; }
run capture-replay 60 "$B/bin/mlxd-capture" --replay fixtures/roce-pcaps/hsb_medium_64k_4pages.pcap --gpu -q ||
    { say "FAIL: mlxd-capture --replay --gpu"; exit 1; }
say "PASS: $DRIVER: attributes, dma-buf export, frames from the generator and a capture into cuMemAlloc memory through the emulated NIC, metadata and payload verified"
