#!/usr/bin/env bash
# benchmarks/gate_decision_cost.py on the H200: seconds, host memory and device memory per gate decision, for the
# base/head process split (issue 38). One device call, carrying bubblewrap's .deb files (see device_sandbox.sh):
#   carry [".deb"], command `bash benchmarks/gate_decision_cost_h200.sh`
# With a split to compare against, run both in the same call on the same warm machine: LABEL names the commit's
# design, and a second checkout's figures go in the same results file (REF_TREE: a folder holding the other tree).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/device_sandbox.sh"  # bubblewrap from the carried .deb files
python3 -c "from kforge_bot.doctor.probes import probe_sandbox; print(probe_sandbox('cuda'))"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
label=${LABEL:-"$(git rev-parse --short HEAD 2>/dev/null || echo this tree): base and head in one candidate worker"}
timeout 280 python3 benchmarks/gate_decision_cost.py --target cuda --decisions "${DECISIONS:-8}" --label "$label" \
  --conditions "the device machine, alone" --out "$out"
if [ -n "${REF_TREE:-}" ]; then
  (cd "$REF_TREE" && PYTHONPATH=$REF_TREE timeout 280 python3 benchmarks/gate_decision_cost.py --target cuda \
    --decisions "${DECISIONS:-8}" --label "${REF_LABEL:-reference tree}" --conditions "the device machine, alone" \
    --out "$out")
fi
cat "$out/gate_decision_cost_cuda.md"
