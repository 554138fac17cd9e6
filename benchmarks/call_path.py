"""How far a reader follows a command through the package (issue 41's done-when): from `kforge-bot optimize` to
its first model request, and through `kforge-bot check` of the bundled CPU kernel, counted in the bot's process.

For each command, in a fresh process with a profiler on from the start:
- the call path: the package's frames on the stack at the first model request (optimize) or at the first worker's
  start (check), outermost first;
- the package's distinct functions called, and its modules imported, up to that point (optimize) or in the whole
  command (check).

`--tree DIR` counts another checkout (an older commit's worktree, say) with this one's scripted LLM server. The
model request is stopped where it leaves the bot (openai's chat.completions.create), so no server answers it.

    git worktree add /tmp/before41 f409aa3^1    # the tree before issue 41's floor plan landed
    python benchmarks/call_path.py --tree /tmp/before41 --label before --out /tmp/before.json
    python benchmarks/call_path.py --label after --out /tmp/after.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# Runs in the child: profile every call of the package's code, then run the CLI.
BOOT = r'''
import json, os, sys, threading, traceback
tree, command, out = sys.argv[1], sys.argv[2], sys.argv[3]
package = os.path.join(tree, "kforge_bot") + os.sep
called, modules, seen = set(), set(), {}

def name_of(frame):
    rel = frame.f_code.co_filename[len(package):]
    return rel[:-3].replace(os.sep, ".") + ":" + frame.f_code.co_qualname

def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.startswith(package):
        called.add(name_of(frame))
        modules.add(frame.f_code.co_filename[len(package):])

def path_here():
    return [f"{s.filename[len(package):]}:{s.name}" for s in traceback.extract_stack()
            if s.filename.startswith(package)]

class Stop(BaseException):
    pass

def snapshot(kind):
    if "at" not in seen:
        seen.update(at=kind, path=path_here(), called=len(called), modules=len(modules))

if command == "optimize":
    import openai.resources.chat.completions as completions
    def create(self, *a, **k):
        snapshot("the first model request")
        raise Stop()
    completions.Completions.create = create
else:
    import subprocess
    real_init = subprocess.Popen.__init__
    def popen(self, args, *a, **k):
        text = " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
        if "import main; main(" in text:  # the sandbox's worker command (evaluate.sandbox), not a probe
            snapshot("the first worker's start")
        return real_init(self, args, *a, **k)
    subprocess.Popen.__init__ = popen

sys.setprofile(profile)
threading.setprofile(profile)
from kforge_bot import cli
try:
    cli.main(sys.argv[4:])
except (Stop, SystemExit):
    pass
sys.setprofile(None)
seen.setdefault("at", "the end")
seen["called_total"] = len(called)
seen["modules_total"] = len(modules)
with open(out, "w") as f:
    json.dump(seen, f)
'''


def count(tree: Path, command: str, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kforge-call-path-") as folder:
        out = Path(folder) / "seen.json"
        proc = subprocess.run([sys.executable, "-c", BOOT, str(tree), command, str(out), *argv], env=env,
                              capture_output=True, text=True, timeout=600, cwd=folder)
        if not out.exists():
            raise SystemExit(f"{command}: nothing counted (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout to count (default: this one)")
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    tree = args.tree.resolve()
    sys.path.insert(0, str(REPO / "tests"))
    from fakes.llm_server import ScriptedLLMServer  # this checkout's: it serves /models for the endpoint check

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KFORGE_"))}
    env["PYTHONPATH"] = str(tree)
    env["KFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="kforge-call-path-cache-")
    manifest = tree / "examples" / "kforge.yaml"
    kernel = "matmul_bias_relu_cpu"
    result: dict[str, Any] = {"label": args.label, "tree": str(tree)}
    with tempfile.TemporaryDirectory(prefix="kforge-call-path-report-") as report, ScriptedLLMServer() as server:
        result["optimize"] = count(tree, "optimize", ["optimize", str(manifest), "--kernel", kernel, "--iterations",
                                                      "1", "--report", report + "/r", "--base-url", server.base_url,
                                                      "--model", "kforge-test-model"], env)
    result["check"] = count(tree, "check", ["check", str(manifest), "--kernel", kernel, "--target", "cpu"], env)
    args.out.write_text(json.dumps(result, indent=1))
    for command in ("optimize", "check"):
        r = result[command]
        print(f"{args.label}: {command}: at {r['at']}: {len(r['path'])} frames of the package on the stack, "
              f"{r['called']} distinct functions and {r['modules']} modules called before it; "
              f"{r['called_total']} functions, {r['modules_total']} modules in all")


if __name__ == "__main__":
    main()
