#!/usr/bin/env bash
# One device call: the GPU test group and the GPU benchmarks, results under $OUT (or ./gpu-out).
# Usage on the H200: PYTHONPATH=$PWD bash benchmarks/run_h200.sh [tests] [harness|harness-short] [tuner] [gate|gate-slowdown] [scale]
# Two GPUs: run two step lists side by side, e.g. CUDA_VISIBLE_DEVICES=1 OUT=$OUT/gpu1 bash benchmarks/run_h200.sh tuner &
# The device returns at most 8 files from $OUT: keep one call's steps under that (the output tail of each step
# is printed too, so a figure survives even when its file does not come back).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
steps=${*:-tests harness tuner gate}
for step in $steps; do
  case $step in
    tests)   KFORGE_GPU_RESULTS=$out/gpu_e2e.jsonl timeout 560 python3 -m pytest -m gpu tests/test_gpu.py tests/test_gpu_cli.py -v --tb=short --timeout 420 -p no:cacheprovider ${KFORGE_GPU_TESTS:+-k "$KFORGE_GPU_TESTS"} 2>&1 | grep -v USDT | tee "$out/gpu_tests.log" | grep -E "PASSED|FAILED|ERROR|passed|failed|Error|assert" ;;
    harness) timeout 240 python3 benchmarks/harness_resolution.py --runs 10 --small-runs 5 --budget 1.5 --out "$out" > "$out/harness.log" 2>&1; tail -12 "$out/harness.log" ;;
    harness-short) timeout 200 python3 benchmarks/harness_resolution.py --short-only --small-runs 5 --budget 1.5 --out "$out" > "$out/harness.log" 2>&1; tail -8 "$out/harness.log" ;;
    tuner)   [ -f benchmarks/tuner_benchmark.py ] && { timeout 420 python3 benchmarks/tuner_benchmark.py --target cuda --out "$out" > "$out/tuner.log" 2>&1; tail -15 "$out/tuner.log"; } ;;
    gate)    [ -f benchmarks/gate_benchmark.py ] && { timeout 330 python3 benchmarks/gate_benchmark.py --target cuda --out "$out" > "$out/gate.log" 2>&1; tail -15 "$out/gate.log"; } ;;
    gate-slowdown) timeout 200 python3 benchmarks/gate_benchmark.py --target cuda --skip-aa --no-full-gate --max-seconds 170 --out "$out" > "$out/gate.log" 2>&1; tail -8 "$out/gate.log" ;;
    scale)   timeout 320 python3 benchmarks/scale_benchmark.py --out "$out" > "$out/scale.log" 2>&1; tail -25 "$out/scale.log" ;;
  esac
done
