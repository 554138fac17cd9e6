#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stand up an Intel Arc B580 machine as a kforge-bot self-hosted runner. See README.md beside this file.
# NOT run on an Arc B580 by the kforge-bot project (none was available): see README.md, "What has not run".
# usage: ./setup.sh [check|install-system|install-python|doctor|register|jit|labels|help]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

RUNNER_NAME=arc-b580
RUNNER_LABELS="self-hosted,linux,x64,arc-b580"
TARGET_KIND=xpu
# PyTorch's XPU wheels (they bring pytorch-triton-xpu); they need only the GPU driver below.
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/xpu}"

# shellcheck source=../common.sh
. "$HERE/../common.sh"

hw_check() {
  local ok=0
  if have lspci; then
    if lspci -nnk | grep -A3 -Ei 'vga|display' | grep -Eiq 'B580|Battlemage|8086:e20b'; then
      log "GPU: $(lspci -nn | grep -Ei 'vga|display' | grep -Ei 'intel' | head -n1)"
      # Battlemage is driven by the xe kernel driver (i915 does not support it).
      if lspci -nnk | grep -A3 -Ei '8086:e20b|B580|Battlemage' | grep -q 'Kernel driver in use: xe'; then
        log "kernel driver: xe"
      else
        warn "the GPU is not bound to the xe kernel driver: use a kernel with Battlemage support (Ubuntu 24.04 HWE or newer)"
        ok=1
      fi
    else
      warn "no Arc B580 (PCI 8086:e20b, Battlemage) found by lspci: this is not an arc-b580 machine"
      ok=1
    fi
  else
    warn "lspci missing (apt-get install pciutils): cannot identify the GPU"
    ok=1
  fi
  if ls /dev/dri/renderD* >/dev/null 2>&1; then log "render nodes: $(echo /dev/dri/renderD*)"; else warn "no /dev/dri/renderD* node"; ok=1; fi
  if id "$RUNNER_USER" >/dev/null 2>&1 && ! id -nG "$RUNNER_USER" | grep -qw render; then
    warn "runner user '$RUNNER_USER' is not in the 'render' group: it cannot open the GPU (run: $0 install-system)"
    ok=1
  fi
  if have xpu-smi; then log "xpu-smi: $(xpu-smi discovery 2>&1 | grep -i 'Device Name' | head -n1)"; else warn "xpu-smi missing (run: $0 install-system)"; fi
  if have clinfo; then log "OpenCL devices: $(clinfo -l 2>/dev/null | grep -ci device || true)"; fi
  if have icpx; then log "icpx: $(icpx --version | head -n1)"; else warn "icpx missing: SYCL candidates unavailable (oneAPI DPC++; Triton candidates still work)"; fi
  if have unitrace; then log "unitrace: present"; else warn "unitrace missing: optional (build from intel/pti-gpu); the PyTorch profiler's XPU activity still works"; fi
  return "$ok"
}

# The client-GPU packages PyTorch's own CI installs for Arc on Ubuntu jammy/noble
# (pytorch/pytorch .ci/docker/common/install_xpu.sh, XPU_DRIVER_TYPE=client).
hw_install_system() {
  # shellcheck disable=SC1091
  . /etc/os-release
  case "${VERSION_CODENAME:-none}" in jammy|noble) ;; *)
    die "Ubuntu 22.04 (jammy) or 24.04 (noble) only; elsewhere follow Intel's 'PyTorch prerequisites for Intel GPUs'" ;;
  esac
  apt-get update -y
  apt-get install -y software-properties-common pciutils
  add-apt-repository -y ppa:kobuk-team/intel-graphics
  apt-get install -y libze-intel-gpu1 libze1 intel-metrics-discovery intel-opencl-icd clinfo intel-gsc \
    libze-dev intel-ocloc xpu-smi
  if id "$RUNNER_USER" >/dev/null 2>&1; then usermod -aG render "$RUNNER_USER"; log "added $RUNNER_USER to the render group"; fi
  log "done; oneAPI DPC++ (icpx, for SYCL candidates) is separate: Intel's oneAPI apt repository, package intel-oneapi-compiler-dpcpp-cpp"
}

hw_torch_check() {
  "$1" - <<'PY' || die "torch cannot use the Arc GPU (see above)"
import sys
import torch
print(f"torch {torch.__version__}, XPU {getattr(torch.version, 'xpu', None)}")
if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
    sys.exit("torch.xpu.is_available() is False: GPU driver missing, user not in 'render', or a non-XPU torch build")
print("device:", torch.xpu.get_device_name(0))
try:
    import triton
    print("triton:", triton.__version__)
except ImportError:
    print("triton: missing (pip install pytorch-triton-xpu from the same index)")
PY
}

kforge_main "$@"
