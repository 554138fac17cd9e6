#!/usr/bin/env bash
# The GPU group's CLI steps by hand, printing what the tests do not: the optimize run's lines and the gate's own
# output (on the H100, 2026-12-06, the tuner wrote no best.py and the gate no JSON). One device call, .deb carried.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/device_sandbox.sh"
w=$(mktemp -d); cp -r examples "$w/repo"; cd "$w/repo"
git init -q -b main && git add -A && git -c user.email=a@b -c user.name=a commit -qm examples
printf 'version: 1\ngate:\n  workloads: {budget_s: 60, max_pairs: 8}\n' > policy.yml
timeout 150 python3 -m kforge_bot.cli optimize kforge.yaml --kernel rmsnorm_triton --target cuda --iterations 2 \
  --report "$w/run" --out "$w/best.py" --counters off 2>&1 | tail -25
echo "== optimize exit ${PIPESTATUS[0]}"
python3 - <<'P'
import re,pathlib
p=pathlib.Path("triton/rmsnorm.py"); t=p.read_text()
p.write_text(t.replace("    out = torch.empty_like(x)\n","    x = x.clone()\n    out = torch.empty_like(x)\n"))
P
git -c user.email=a@b -c user.name=a commit -qam slowed
GITHUB_ACTIONS=true timeout 200 python3 -m kforge_bot.cli gate --base HEAD~1 --head HEAD --target cuda --repo . \
  --policy policy.yml --json "$w/gate.json" --no-cache 2>&1 | tail -30
echo "== gate exit ${PIPESTATUS[0]}"
