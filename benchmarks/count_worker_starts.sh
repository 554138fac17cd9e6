#!/usr/bin/env bash
# How many sandboxed workers a command starts (issue 41: the suite's time is mostly their torch imports).
# KFORGE_BWRAP points at a wrapper that logs each bubblewrap start (a probe or a worker) and then runs bubblewrap.
# A KFORGE_BWRAP of the caller's turns the forkserver off (evaluate.forked): every worker counted here starts afresh.
#   bash benchmarks/count_worker_starts.sh python -m pytest -q -p no:cacheprovider
# PER_TEST=file.tsv with a pytest command: a line per test too (its workers, its seconds; worker_starts_plugin.py).
set -euo pipefail
bwrap=$(command -v bwrap)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/bwrap" <<WRAP
#!/bin/sh
case "\$1" in --version) ;; *)
  case "\$*" in *"exit 0"*) echo probe ;; *) echo worker ;; esac >> "$dir/starts" ;; esac
exec "$bwrap" "\$@"
WRAP
chmod 755 "$dir/bwrap"
plugin=()
if [ -n "${PER_TEST:-}" ]; then
  : > "$PER_TEST"
  export KFORGE_STARTS_LOG="$dir/starts" KFORGE_STARTS_PER_TEST=$(realpath "$PER_TEST")
  export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
  plugin=(-p worker_starts_plugin)
fi
status=0
KFORGE_BWRAP="$dir/bwrap" "$@" "${plugin[@]}" || status=$?
echo "sandbox starts: $(grep -c worker "$dir/starts" 2>/dev/null || true) workers, $(grep -c probe "$dir/starts" 2>/dev/null || true) probes"
exit $status
