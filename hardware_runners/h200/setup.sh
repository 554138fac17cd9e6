#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stand up a NVIDIA H200 SXM machine as a kforge-bot self-hosted runner. See README.md beside this file.
# usage: ./setup.sh [check|install-system|install-python|doctor|register|jit|labels|help]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

RUNNER_NAME=h200
RUNNER_LABELS="self-hosted,linux,x64,h200"
TARGET_KIND=cuda
GPU_NAME_REGEX='NVIDIA H200'
GPU_CC=9.0
TORCH_ARCH=sm_90

# shellcheck source=../common.sh
. "$HERE/../common.sh"
# shellcheck source=../nvidia.sh
. "$HERE/../nvidia.sh"

hw_check() { nvidia_check; }
hw_install_system() { nvidia_install_system; }
hw_torch_check() { nvidia_torch_check "$1"; }

kforge_main "$@"
