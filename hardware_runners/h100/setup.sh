#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stand up a NVIDIA H100 SXM5 machine as a kforge-bot self-hosted runner. See README.md beside this file.
# usage: ./setup.sh [check|install-system|install-python|doctor|register|jit|labels|help]
# What nvidia.sh checks for: the name nvidia-smi reports, the compute capability, torch's arch.
RUNNER_NAME=h100
RUNNER_LABELS="self-hosted,linux,x64,h100"
GPU_NAME_REGEX='NVIDIA H100 80GB HBM3' GPU_CC=9.0 TORCH_ARCH=sm_90
# shellcheck source=../nvidia.sh
. "$(dirname "${BASH_SOURCE[0]}")/../nvidia.sh"
kforge_main "$@"
