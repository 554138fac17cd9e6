#!/usr/bin/env bash
# benchmarks/gate_decision_cost.py on the H200: seconds, host memory and device memory per gate decision, before and
# after the base/head process split (issue 38), in one call on one warm machine. One device call, carrying
# bubblewrap's .deb files (see device_sandbox.sh):
#   carry [".deb"], command `bash benchmarks/gate_decision_cost_h200.sh`
# The "before" row is this tree with base and head in one worker (--one-worker: the layout before the split); the
# "after" row is the split. They alternate (before, after, before, after) so drift on the machine falls on both.
# Four runs of 3 decisions, each bounded at 130 s: the whole call stays inside the device's 10 minutes.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/device_sandbox.sh"  # bubblewrap from the carried .deb files
python3 -c "from kforge_bot.doctor.probes import probe_sandbox; print(probe_sandbox('cuda'))"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "this tree")
n=${DECISIONS:-3}
# SHIP=1: three rows a round: base and head in one worker (before the split), the split with the head's worker
# importing the base's files (--no-ship), and shipped inputs (this tree): issue 38's whole before and after.
for round in $(seq 1 "${ROUNDS:-2}"); do
  if [ -n "${SHIP:-}" ]; then
    timeout "${ROW_TIMEOUT:-130}" python3 benchmarks/gate_decision_cost.py --target cuda --decisions "$n" --one-worker \
      --label "$commit, round $round: base and head in one worker (before the split)" \
      --conditions "the device machine, alone" --out "$out"
    timeout "${ROW_TIMEOUT:-130}" python3 benchmarks/gate_decision_cost.py --target cuda --decisions "$n" --no-ship \
      --label "$commit, round $round: the head's worker imports the base's reference and inputs" \
      --conditions "the device machine, alone" --out "$out"
    timeout "${ROW_TIMEOUT:-130}" python3 benchmarks/gate_decision_cost.py --target cuda --decisions "$n" \
      --label "$commit, round $round: shipped inputs (the head's worker imports none of the base's files)" \
      --conditions "the device machine, alone" --out "$out"
    continue
  fi
  timeout "${ROW_TIMEOUT:-130}" python3 benchmarks/gate_decision_cost.py --target cuda --decisions "$n" --one-worker \
    --label "$commit, round $round: base and head in one worker (before the split)" \
    --conditions "the device machine, alone" --out "$out"
  timeout "${ROW_TIMEOUT:-130}" python3 benchmarks/gate_decision_cost.py --target cuda --decisions "$n" \
    --label "$commit, round $round: base and head each in a worker of their own (the split)" \
    --conditions "the device machine, alone" --out "$out"
done
cat "$out/gate_decision_cost_cuda.md"
