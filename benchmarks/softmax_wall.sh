#!/usr/bin/env bash
# Wall time of one `kforge-bot check` of the bundled Triton softmax (two shape sets, up to 32768x8192 fp16,
# 512 MB in and out) on a GPU, and where it went: the per-phase breakdown of the JSON report. Once with the
# outputs through the host (KFORGE_OUTPUTS=files, as before 2026-12-02) and once as shared device memory.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
for mode in ${SOFTMAX_MODES:-files device}; do
  start=$(date +%s.%N)
  KFORGE_OUTPUTS=$mode python3 -m kforge_bot check examples/kforge.yaml --kernel softmax_triton --target cuda \
    --json "$out/softmax_check_$mode.json" > "/tmp/softmax_check_$mode.log" 2>&1
  end=$(date +%s.%N)
  python3 - "$out/softmax_check_$mode.json" "$start" "$end" "$mode" <<'PY'
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
  tail -3 "/tmp/softmax_check_$mode.log"
done
