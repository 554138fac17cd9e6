#!/usr/bin/env bash
# Wall time of one `kforge-bot check` of the bundled Triton softmax (two shape sets, up to 32768x8192 fp16,
# 512 MB in and out) on a GPU, and where it went: the per-phase breakdown of the JSON report. Once with the
# outputs through the host (KFORGE_OUTPUTS=files, as before 2026-12-02) and once as shared device memory.
# SOFTMAX_MODES may name a mode twice ("device device": the first check after a machine's start, then one with
# the file cache warm, as on a runner that has judged before); each run's report is numbered.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
n=0
for mode in ${SOFTMAX_MODES:-files device}; do
  n=$((n + 1))
  start=$(date +%s.%N)
  KFORGE_OUTPUTS=$mode python3 -m kforge_bot check examples/kforge.yaml --kernel softmax_triton --target cuda \
    --json "$out/softmax_check_${mode}_$n.json" > "/tmp/softmax_check_$n.log" 2>&1
  end=$(date +%s.%N)
  python3 - "$out/softmax_check_${mode}_$n.json" "$start" "$end" "$mode #$n" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print(f"softmax_triton check ({sys.argv[4]}): no report ({exc})")
    raise SystemExit(0)
print(f"softmax_triton check, outputs as {sys.argv[4]}: {r['verdict']} {r.get('speedup')} "
      f"wall {float(sys.argv[3]) - float(sys.argv[2]):.1f} s; {r.get('reason', '')[:200]}")
print("phases", json.dumps(r["details"].get("phases")))
PY
  tail -3 "/tmp/softmax_check_$n.log"
done
