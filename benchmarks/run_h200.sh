#!/usr/bin/env bash
# One device call: the GPU test group and the GPU benchmarks, results under $OUT (or ./gpu-out).
# Usage on the H200: PYTHONPATH=$PWD bash benchmarks/run_h200.sh [probe] [sandbox] [tests] [accept] [softmax] [agreement] [throughput] [aa-placement]
#                    [output-probe] [eager-lead] [sweep] [l3-agreement] [busy-split] (honest heads that only add host work)
#                    [harness|harness-short] [tuner]
#                    [gate|gate-slowdown|gate-spin] [scale] [parallel] [library] [libraries2]   (accept: KB_PROBLEMS=1/40,2/12 KB_MAX_S=300, KernelBench in .kb/)
#                    [history-lib] [history-aa] (issue 43; Liger-Kernel in .libs/, ruptures in .whl/)
#   history-lib needs the library's history (a stripped copy has none): a shallow bare clone, e.g.
#     git clone --bare --depth 150 --single-branch --no-tags file://<Liger-Kernel git dir> .libs/Liger-Kernel-hist.git
#   with at least HLIB_COMMITS first-parent commits touching src/ (git -C it log --first-parent --oneline -- src),
#   passed as LIB_DIR=.libs/Liger-Kernel-hist.git; and ruptures and GitPython (the image has neither) for Python 3.12 in .whl/:
#     pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 ruptures scipy numpy gitpython -d .whl
#                    [gpumode] (gpu-mode/reference-kernels in .gpumode/) [l2-baselines] (KernelBench in .kb/; 8 GPUs)
#                    [heldout] (KernelBench L1+L2 A/A with held-out variants, one shard per GPU; KernelBench in .kb/)
# Two GPUs: run two step lists side by side, e.g. CUDA_VISIBLE_DEVICES=1 OUT=$OUT/gpu1 bash benchmarks/run_h200.sh tuner &
# The device returns at most 8 files from $OUT: keep one call's steps under that (the output tail of each step
# is printed too, so a figure survives even when its file does not come back).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
. "$(dirname "$0")/device_sandbox.sh"  # bubblewrap from the carried .deb files
# Wheels the image lacks (pydantic, for KernelBench's harness) travel in .whl/; Ray for the scale step in .ray/:
# its dependencies' wheels and the Ray wheel unpacked without its Java jars and rllib/serve/tune/train/llm
# (ray-slim.tar.xz: 26 MB, where the whole wheel is over the 64 MiB a call may carry). To make .ray/:
#   pip download ray==2.60.0 --python-version 3.12 --only-binary :all: --no-deps --platform manylinux2014_x86_64
#   unzip it, rm -r ray/{jars,rllib,llm,serve,tune,train}, tar cJf .ray/ray-slim.tar.xz ray ray-*.dist-info, and
#   pip download its dependencies (click filelock jsonschema msgpack packaging protobuf pyyaml requests) the same way.
wheels=$(ls .whl/*.whl .ray/*.whl 2>/dev/null)
if [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
[ -f .ray/ray-slim.tar.xz ] && mkdir -p /tmp/site && tar -xJf .ray/ray-slim.tar.xz -C /tmp/site
steps=${*:-tests harness tuner gate}
for step in $steps; do
  case $step in
    library) timeout ${LIB_TIMEOUT:-560} python3 benchmarks/real_library.py --library "${LIB_DIR:-.libs/Liger-Kernel}" \
               ${LIB_BASE:+--base "$LIB_BASE"} ${LIB_HEAD:+--head "$LIB_HEAD"} --steps "${LIB_STEPS:-list,check,gate}" \
               ${LIB_TIMEOUTS:+--timeouts "$LIB_TIMEOUTS"} ${LIB_OPT_KERNEL:+--optimize-kernel "$LIB_OPT_KERNEL"} --out "$out" 2>&1 | tail -${LIB_TAIL:-80} ;;  # a real library through list --import, check --all, the gate (issue 30)
    history-lib) timeout ${HLIB_TIMEOUT:-560} python3 benchmarks/history_library.py --library "${LIB_DIR:-.libs/Liger-Kernel}" \
               --commits "${HLIB_COMMITS:-20}" --kernels "${HLIB_KERNELS:-rms_norm}" --out "$out" 2>&1 | tail -40 ;;  # issue 43: track, history, alert, bisect
    history-aa) timeout ${HAA_TIMEOUT:-560} python3 benchmarks/history_false_alarms.py --target cuda --budget "${HAA_BUDGET:-5}" \
               --sets "${HAA_SETS:-50}" --commits "${HAA_COMMITS:-30}" \
               --out "$out" 2>&1 | tail -40 ;;  # issue 43: A/A false alarms of the change-point rule, 50 series x 30 commits
    libraries2) timeout ${LIB2_TIMEOUT:-590} python3 benchmarks/real_libraries_round2.py --libs .libs ${LIB2_ONLY:+--only $LIB2_ONLY} \
               --steps "${LIB2_STEPS:-check,init}" --out "$out" 2>&1 | tail -${LIB_TAIL:-120} ;;  # Liger-Kernel, FlagGems, attorch forward and backward; init's share that imports (issue 45)
    sandbox) python3 -c "from kforge_bot.doctor.probes import probe_sandbox; print(probe_sandbox('cuda'))"
             python3 benchmarks/sandbox_cost.py --devices cuda --runs 20 --json "$out/sandbox_cost_h200.json" ;;
    probe)   timeout 90 python3 benchmarks/worker_start.py; timeout 120 python3 benchmarks/ncu_probe.py --out "$out" ;;
    ncu-optimize) KFORGE_GPU_RESULTS=$out/gpu_e2e.jsonl timeout 300 python3 -m pytest -m gpu tests/test_gpu_cli.py -k counters -v --tb=short -p no:cacheprovider 2>&1 | tail -30; tail -3 "$out/gpu_e2e.jsonl" ;;
    probe-ncu) timeout ${NCU_PROBE_TIMEOUT:-150} python3 benchmarks/ncu_probe.py --out /tmp/ncu-probe 2>&1 | grep -v "^ *head:" ;;  # its CSVs stay on the machine: 8 files come back
    softmax) timeout 120 bash benchmarks/softmax_wall.sh ;;
    busy-split) timeout ${BUSY_TIMEOUT:-400} python3 benchmarks/busy_before_split.py --heads "${BUSY_HEADS:-aa,guard,host20,host60}" \
               --rows 8192 --cols 4096 --layouts split --profile off --repeats "${BUSY_REPEATS:-3}" 2>&1 | grep -v "^\[" ;;  # the hidden-work check on short kernels (issue 43's bisect)
    output-probe) timeout 150 python3 benchmarks/output_path_probe.py --json "$out/output_path_probe.json" ;;
    eager-lead) timeout 150 python3 benchmarks/eager_lead.py --json "$out/eager_lead.json" ;;
    throughput) timeout 300 python3 benchmarks/optimize_throughput.py --kernelbench .kb --problem "${KB_TP:-2/12}" \
                  --candidates "${KB_TP_N:-12}" --target cuda --out "$out" ;;  # needs openai: .whl (openai, jiter, sniffio, distro)
    agreement) timeout 200 python3 benchmarks/agreement.py --kernelbench .kb --problem "${KB_AGREE:-1/40}" --json "$out/agreement.json" 2>&1 | grep -v "^\[" ;;
    l3-agreement) timeout ${L3_AGREE_TIMEOUT:-300} python3 benchmarks/l3_agreement.py --kernelbench .kb --problems "${L3_AGREE:-3/28,3/4,3/9}" --json "$out/l3_agreement.json" 2>&1 | grep -v "^\[" ;;
    aa-placement) timeout 120 python3 benchmarks/aa_placement.py --json "$out/aa_placement.json" ;;
    accept*) timeout ${KB_TIMEOUT:-560} python3 benchmarks/kernelbench_acceptance.py --kernelbench .kb --problems "${KB_PROBLEMS:-1/40,1/26,2/12}" \
               --max-seconds "${KB_MAX_S:-300}" --aa-only "${KB_AA_ONLY:-}" --time-budget "${KB_BUDGET:-2}" --out "$out" 2>&1 | grep -v "^\[" | grep -v '^\[{' | tail -${KB_TAIL:-40} ;;
    sweep)   timeout ${KB_TIMEOUT:-560} python3 benchmarks/kernelbench_acceptance.py --kernelbench .kb --problems "${KB_PROBLEMS:-1/all}" \
               --aa-only all --skip-done benchmarks/results/kernelbench_*.jsonl --max-seconds "${KB_MAX_S:-480}" \
               --out "$out" 2>&1 | grep -E "^[0-9]+/[0-9]+ |^kforge-bot: error" ;;  # every problem's A/A verdict, those not yet judged
    tests)   KFORGE_GPU_RESULTS=$out/gpu_e2e.jsonl timeout ${GPU_TEST_TIMEOUT:-560} python3 -m pytest -m gpu ${KFORGE_GPU_FILES:-tests/test_gpu.py tests/test_gpu_cli.py} -v --tb=line --timeout 420 -p no:cacheprovider ${KFORGE_GPU_TESTS:+-k "$KFORGE_GPU_TESTS"} 2>&1 | grep -v USDT | tee "$out/gpu_tests.log" | grep -E "PASSED|FAILED|ERROR|passed|failed|Error|assert" ;;
    harness) timeout 240 python3 benchmarks/harness_resolution.py --runs 10 --small-runs 5 --budget 1.5 --out "$out" > "$out/harness.log" 2>&1; tail -12 "$out/harness.log" ;;
    harness-short) timeout 200 python3 benchmarks/harness_resolution.py --short-only --small-runs 5 --budget 1.5 --out "$out" > /tmp/harness.log 2>&1; tail -8 /tmp/harness.log ;;
    tuner)   [ -f benchmarks/tuner_benchmark.py ] && { timeout 420 python3 benchmarks/tuner_benchmark.py --target cuda --out "$out" > "$out/tuner.log" 2>&1; tail -15 "$out/tuner.log"; } ;;
    gate)    [ -f benchmarks/gate_benchmark.py ] && { timeout 330 python3 benchmarks/gate_benchmark.py --target cuda --out "$out" > "$out/gate.log" 2>&1; tail -15 "$out/gate.log"; } ;;
    gate-spin) timeout ${GATE_TIMEOUT:-200} python3 benchmarks/gate_benchmark.py --target cuda --slowdown-kernel spin --decisions ${GATE_N:-20} --no-full-gate --max-seconds ${GATE_MAX_S:-170} --out "$out" > "$out/gate.log" 2>&1; tail -8 "$out/gate.log" ;;
    gate-slowdown) timeout 200 python3 benchmarks/gate_benchmark.py --target cuda --skip-aa --no-full-gate --max-seconds 170 --out "$out" > "$out/gate.log" 2>&1; tail -8 "$out/gate.log" ;;
    scale)   timeout ${SCALE_TIMEOUT:-560} python3 benchmarks/scale_benchmark.py ${SCALE_SECTIONS:+--sections $SCALE_SECTIONS} ${SCALE_ARGS:-} \
               --out "$out" > "$out/scale.log" 2>&1; tail -40 "$out/scale.log" ;;
    gpumode) timeout ${GM_TIMEOUT:-540} python3 benchmarks/gpumode_h200.py --problems "${GM_PROBLEMS:-.gpumode/reference-kernels/problems/pmpp_v2}" \
               --time-budget "${GM_BUDGET:-1}" ${GM_ONLY:+--only "$GM_ONLY"} --out "$out" 2>&1 | grep -v "^\[" | tail -40 ;;  # .gpumode/: gpu-mode/reference-kernels
    l2-baselines) timeout ${L2_TIMEOUT:-540} python3 benchmarks/l2_gemm_baselines.py --kernelbench .kb --target cuda \
               --time-budget "${L2_BUDGET:-1.5}" ${L2_ARGS:-} --out "$out" 2>&1 | grep -v "^\[" | tail -60 ;;  # 37 problems: 8 GPUs
    heldout) gpus=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$gpus" -ge 1 ] || gpus=1; n=${HELDOUT_SHARDS:-$gpus}
             rm -rf /tmp/heldout-aa; for i in $(seq 0 $((n - 1))); do
               CUDA_VISIBLE_DEVICES=$((i % gpus)) timeout ${HELDOUT_TIMEOUT:-560} python3 benchmarks/heldout_aa.py \
                 --kernelbench .kb --problems "${HELDOUT_PROBLEMS:-1/all,2/all}" --shard $i/$n --cost-every ${HELDOUT_COST_EVERY:-10} \
                 --max-seconds ${HELDOUT_MAX_S:-500} --out /tmp/heldout-aa > /tmp/heldout-aa-$i.log 2>&1 &
             done; wait; tail -2 /tmp/heldout-aa-*.log | grep -v "^$"
             python3 benchmarks/heldout_aa.py --kernelbench .kb --out /tmp/heldout-aa --merge "$out" ;;  # issue 42
    parallel) timeout ${PARALLEL_TIMEOUT:-300} python3 benchmarks/optimize_throughput.py --target cuda \
               --problem examples/kernelbench/softmax_problem.py --candidates 8 --parallel 4 --crash-at 2 \
               --out "$out/parallel" 2>&1 | tail -6 ;;
  esac
done
