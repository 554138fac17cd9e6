#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stand up a Linux CPU machine as a kforge-bot self-hosted runner. See README.md beside this file.
# usage: ./setup.sh [check|install-system|install-python|doctor|register|jit|labels|help]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

RUNNER_NAME=cpu
RUNNER_LABELS="self-hosted,linux,kforge-cpu"
TARGET_KIND=cpu
# CPU-only torch wheels: a plain `pip install torch` on Linux may pull a multi-GB CUDA build.
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"

# shellcheck source=../common.sh
. "$HERE/../common.sh"

hw_check() {
  local governor=/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
  log "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) logical CPUs available)"
  if [ -r "$governor" ]; then
    if [ "$(cat "$governor")" = performance ]; then log "frequency governor: performance"
    else warn "frequency governor is '$(cat "$governor")': timings drift; set 'performance' for stable figures"; fi
  fi
  if have perf; then log "perf: $(perf --version)"; else warn "perf missing: no CPU hardware counters (optional)"; fi
  return 0
}

hw_install_system() {
  have apt-get || die "apt-get not found: install a C++ compiler, python3-venv and perf with your package manager"
  apt-get update -y
  apt-get install -y build-essential python3-venv python3-dev
}

# Builds a tiny torch C++ extension: the path every CPU candidate takes.
hw_torch_check() {
  "$1" - <<'PY' || die "torch cannot build C++ extensions here (see above)"
import torch
from torch.utils.cpp_extension import load_inline
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
mod = load_inline("kforge_setup_probe", cpp_sources="int twice(int x) { return 2 * x; }", functions=["twice"])
assert mod.twice(21) == 42
print("torch cpp_extension: builds and runs")
PY
}

kforge_main "$@"
