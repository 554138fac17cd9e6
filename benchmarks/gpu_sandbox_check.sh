#!/usr/bin/env bash
# One device call: bubblewrap from carried .deb files (.deb/, see benchmarks/README), the sandbox's start cost
# with the GPU's device nodes, torch and the GPU inside it, then the GPU test group with every worker sandboxed.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null; then
  mkdir -p /tmp/bw && for f in .deb/*.deb; do dpkg -x "$f" /tmp/bw; done
  export KFORGE_BWRAP=/tmp/bw/usr/bin/bwrap LD_LIBRARY_PATH=/tmp/bw/usr/lib/x86_64-linux-gnu:/tmp/bw/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "from kforge_bot.evaluate import isolation; print(isolation.probe())"
python3 -c "from kforge_bot.doctor import probe_sandbox; print(probe_sandbox('cuda'))"
python3 benchmarks/sandbox_cost.py --devices cuda --runs 20 --json "$out/sandbox_cost_h200.json"; cat "$out/sandbox_cost_h200.json"
timeout ${GPU_TEST_TIMEOUT:-420} python3 -m pytest -m gpu tests/test_gpu.py -v --tb=short -p no:cacheprovider ${KFORGE_GPU_TESTS:+-k "$KFORGE_GPU_TESTS"} 2>&1 | grep -v USDT | tee "$out/gpu_tests.log" | grep -E "PASSED|FAILED|ERROR|passed|failed|Error|assert"
