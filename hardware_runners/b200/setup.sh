#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stand up a NVIDIA B200 machine as a kforge-bot self-hosted runner. See README.md beside this file.
# usage: ./setup.sh [check|install-system|install-python|doctor|register|jit|labels|help]
# What nvidia.sh checks for: the name nvidia-smi reports, the compute capability, torch's arch.
RUNNER_NAME=b200
RUNNER_LABELS="self-hosted,linux,x64,b200"
GPU_NAME_REGEX='NVIDIA B200' GPU_CC=10.0 TORCH_ARCH=sm_100
# shellcheck source=../nvidia.sh
. "$(dirname "${BASH_SOURCE[0]}")/../nvidia.sh"
kforge_main "$@"
