#!/usr/bin/env bash
# Wall time of one `kforge-bot check` of the bundled Triton softmax (two shape sets, up to 32768x8192 fp16,
# 512 MB in and out) on a GPU, and where it went: the per-phase breakdown of the JSON report.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
start=$(date +%s.%N)
python3 -m kforge_bot check examples/kforge.yaml --kernel softmax_triton --target cuda --json "$out/softmax_check.json" > "$out/softmax_check.log" 2>&1
end=$(date +%s.%N)
python3 - "$out/softmax_check.json" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"softmax_triton check: {r['verdict']} {r.get('speedup')} wall {float(sys.argv[3]) - float(sys.argv[2]):.1f} s")
print("phases", json.dumps(r["details"].get("phases")))
PY
