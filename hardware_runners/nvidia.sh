# shellcheck shell=bash
# The setup shared by the NVIDIA runners (b200, h100, h200): the target kind and the three hw_* steps
# common.sh asks for. A NVIDIA setup.sh sets RUNNER_NAME, RUNNER_LABELS, GPU_NAME_REGEX (what nvidia-smi
# must report), GPU_CC (compute capability, e.g. 9.0) and TORCH_ARCH (e.g. sm_90), sources this file and
# calls kforge_main "$@".

set -euo pipefail
TARGET_KIND=cuda
# shellcheck source-path=SCRIPTDIR source-path=SCRIPTDIR/.. source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

hw_check() {
  local ok=0 names cc
  if ! have nvidia-smi; then
    warn "nvidia-smi missing: install the NVIDIA data-center driver (open kernel modules on Hopper/Blackwell)"
    return 1
  fi
  names="$(nvidia-smi --query-gpu=name --format=csv,noheader)" || { warn "nvidia-smi cannot talk to the driver"; return 1; }
  log "GPUs: $(printf '%s' "$names" | tr '\n' ';')"
  log "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)"
  if ! printf '%s\n' "$names" | grep -Eq "^${GPU_NAME_REGEX}\$"; then
    warn "no GPU named like '${GPU_NAME_REGEX}': this is not a $RUNNER_NAME machine"
    ok=1
  fi
  cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 || true)"
  if [ -n "$cc" ] && [ "$cc" != "$GPU_CC" ]; then warn "compute capability $cc, expected $GPU_CC"; ok=1; fi
  if have nvcc; then log "nvcc: $(nvcc --version | grep -i release)"; else warn "nvcc missing: CUDA C++ candidates cannot compile (Triton ones can)"; fi
  if have ncu; then log "ncu: $(ncu --version | grep -i version | head -n1)"; else warn "ncu missing: no hardware counters (install Nsight Compute)"; fi
  if have compute-sanitizer; then log "compute-sanitizer: present"; else warn "compute-sanitizer missing (ships with the CUDA toolkit)"; fi
  if [ -r /proc/driver/nvidia/params ]; then
    if grep -q '^RmProfilingAdminOnly: 1' /proc/driver/nvidia/params; then
      warn "GPU counters are admin-only: ncu will fail with ERR_NVGPUCTRPERM for the runner user (run: $0 install-system)"
    else
      log "GPU counters: readable by non-admin users"
    fi
  fi
  return "$ok"
}

# The driver and CUDA toolkit come from NVIDIA's own installers or repositories (their choice of
# version is the team's); this only does what kforge-bot needs on top: counter access for ncu.
hw_install_system() {
  local conf=/etc/modprobe.d/kforge-nvidia-profiling.conf
  have nvidia-smi || die "install the NVIDIA driver first (NVIDIA's data-center driver documentation), then rerun"
  printf 'options nvidia NVreg_RestrictProfilingToAdminUsers=0\n' >"$conf"
  log "wrote $conf: lets non-admin users read GPU performance counters (ncu)"
  log "it takes effect when the nvidia module reloads: reboot, or stop GPU users and 'modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia'"
  if have update-initramfs; then update-initramfs -u; fi
}

hw_torch_check() {
  local python="$1"
  "$python" - "$TORCH_ARCH" <<'PY' || die "torch cannot use this GPU (see above)"
import sys
import torch
arch = sys.argv[1]
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, archs {torch.cuda.get_arch_list()}")
if not torch.cuda.is_available():
    sys.exit("torch.cuda.is_available() is False: driver missing or too old for this torch build")
if arch not in torch.cuda.get_arch_list():
    sys.exit(f"this torch build has no {arch} code: reinstall with TORCH_INDEX_URL set to a PyTorch index for a newer CUDA")
print("device:", torch.cuda.get_device_name(0))
PY
}
