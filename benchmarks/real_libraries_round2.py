"""Three public Triton libraries through kforge-bot, as written (issue 45): Liger-Kernel forward and backward (RoPE's
backward with its in-place forward), FlagGems and attorch (elementwise, reductions, norms, a GEMM, in-place ops,
keyword arguments), each kernel's verdict and figures by direction; and, per library, the share of `init`'s
proposals whose entries import as written.

The libraries are never part of this repository: each is a bare mirror under --libs (`.libs/<name>`, carried by the
lead). For each, benchmarks/real_library.py runs `list --import` and `check --all` on a scratch repository holding
the library's files and its manifest from examples/libraries/. Then `init --write` proposes a manifest on a clean
copy; every entry's reference, inputs and shapes are set aside (a proposal's TODOs are the user's to write) and
`list --import` imports what init named (entry, file, import roots) in its workers: the share that imports is the
figure. Writes --out/real_libraries_round2.md (machine, date, conditions) and each library's real_library.md.

    python3 benchmarks/real_libraries_round2.py --libs .libs --out $OUT
    python3 benchmarks/real_libraries_round2.py --libs .libs --only attorch --steps init --target cpu   # CPU smoke
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from real_library import LIBRARY_GIT, machine, run  # noqa: E402

EXAMPLES = ROOT / "examples" / "libraries"
# name -> (its manifest, the paths of the library a scratch repository holds)
LIBRARIES: dict[str, tuple[Path, list[str]]] = {
    "Liger-Kernel": (EXAMPLES / "liger-kernel" / "kforge.liger.yaml", ["src"]),
    "FlagGems": (EXAMPLES / "flaggems" / "kforge.flaggems.yaml", ["src"]),
    "attorch": (EXAMPLES / "attorch" / "kforge.attorch.yaml", ["attorch"]),
}
STUB_INPUTS = "kforge_bench_inputs.py"


def checked(library: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """real_library.py's list --import and check --all on the library with its manifest."""
    manifest, paths = LIBRARIES[library]
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "real_library.py"), "--library",
                           str(Path(args.libs) / library), "--manifest", str(manifest), "--paths", *paths,
                           "--steps", "list,check", "--target", args.target, "--time-budget", str(args.time_budget),
                           "--timeouts", args.timeouts, "--out", str(out)],
                          capture_output=True, text=True, timeout=args.library_timeout)
    print(proc.stdout[-6000:] + proc.stderr[-2000:], flush=True)
    return {"exit": proc.returncode, "wall_s": round(time.monotonic() - started, 1)}


def init_share(library: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """`init --write` on a clean copy, then `list --import` of every proposed entry as init named it."""
    work = Path(tempfile.mkdtemp(prefix="kforge-init-"))
    repo = work / library
    subprocess.run([*LIBRARY_GIT, "clone", "-q", str(Path(args.libs).resolve() / library), str(repo)], check=True)
    wrote = run(f"{library}: init --write", ["init", str(repo), "--write"], repo, args.init_timeout)
    result: dict[str, Any] = {"init_exit": wrote["exit"], "init_wall_s": wrote["wall_s"]}
    manifest = repo / "kforge.yaml"
    if wrote["exit"] != 0 or not manifest.is_file():
        result["note"] = wrote["tail"].strip().splitlines()[-1] if wrote["tail"].strip() else "init wrote nothing"
        return result
    data = yaml.safe_load(manifest.read_text())
    kernels = data.get("kernels") or {}
    for entry in kernels.values():  # what init named, with the user's part (reference, inputs, shapes) set aside
        entry.pop("reference", None)
        entry["inputs"] = f"{STUB_INPUTS}:make_inputs"
        entry["shapes"] = [{}]
        entry["targets"] = [args.target]
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    (repo / STUB_INPUTS).write_text("def make_inputs():\n    return ()\n")
    listed = run(f"{library}: list --import (init's entries)", ["list", str(repo), "--import", "--json",
                                                                 str(out / "init_list.json")], repo, args.list_timeout)
    rows = (json.loads((out / "init_list.json").read_text()) if (out / "init_list.json").is_file() else {}) \
        .get("kernels", [])
    ok = [r for r in rows if r.get("imports") == "ok"]
    failing: dict[str, int] = {}
    for r in rows:
        if r.get("imports") != "ok":
            why = str(r.get("error") or r.get("imports")).split(" (run it on a GPU runner")[0][-160:]
            failing[why] = failing.get(why, 0) + 1
    result.update(entries=len(kernels), imported=len(ok), list_wall_s=listed["wall_s"],
                  failing=sorted(failing.items(), key=lambda kv: -kv[1])[:5])
    return result


def report(args: argparse.Namespace, results: dict[str, dict[str, Any]], out: Path) -> str:
    lines = ["# Real libraries, round 2: kernels as written, forward and backward; init's proposals (issue 45)", "",
             f"- Machine: {machine()}; target {args.target}",
             f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"- Command: `python3 benchmarks/real_libraries_round2.py {' '.join(sys.argv[1:])}`",
             "- Libraries: bare mirrors under the carried .libs/ (each one commit: the upstream tree's text files "
             "at the commit its message names)", "",
             "## init: the share of proposals whose entries import as written", "",
             "| library | init | entries proposed | import as written | share | list --import wall | most common "
             "failure |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        share = r.get("init") or {}
        if "entries" in share:
            frac = f"{share['imported'] / share['entries']:.0%}" if share["entries"] else "-"
            why = "; ".join(f"{n}x {w}" for w, n in share.get("failing", [])[:2]).replace("|", "/")
            lines.append(f"| {name} | {share['init_wall_s']:.0f} s | {share['entries']} | {share['imported']} | "
                         f"{frac} | {share['list_wall_s']:.0f} s | {why} |")
        elif share:
            lines.append(f"| {name} | exit {share.get('init_exit')} | - | - | - | - | {share.get('note', '')} |")
    for name, r in results.items():
        page = out / name / "real_library.md"
        if page.is_file():
            lines += ["", f"## {name}: list --import and check --all (manifest: "
                          f"{LIBRARIES[name][0].relative_to(ROOT)})", "",
                      *page.read_text().splitlines()[2:]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--libs", default=str(ROOT / ".libs"), help="the folder of the libraries' bare mirrors")
    parser.add_argument("--only", nargs="+", default=list(LIBRARIES), choices=list(LIBRARIES))
    parser.add_argument("--steps", default="check,init", help="check (list --import, check --all) and/or init")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--time-budget", type=float, default=1.0, help="check's timing budget per kernel (s)")
    parser.add_argument("--timeouts", default="90,300", help="seconds for each library's list and check")
    parser.add_argument("--library-timeout", type=float, default=560)
    parser.add_argument("--init-timeout", type=float, default=120)
    parser.add_argument("--list-timeout", type=float, default=120)
    parser.add_argument("--out", default=os.environ.get("OUT", "lib2-out"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    steps = set(args.steps.split(","))
    results: dict[str, dict[str, Any]] = {}
    text = ""
    for name in args.only:
        (out / name).mkdir(exist_ok=True)
        results[name] = {}
        for step, measure in (("check", checked), ("init", init_share)):
            if step in steps:
                results[name][step] = measure(name, args, out / name)
                text = report(args, results, out)
                (out / "real_libraries_round2.md").write_text(text)  # after each step: a timeout keeps what was done
                if step == "init":  # at once, one line: a later library's timeout or a cut tail keeps this figure
                    print(share_line(name, results[name]["init"]), flush=True)
    print(text, flush=True)
    for name in args.only:  # last, so the device's output tail holds every library's share
        if "init" in results[name]:
            print(share_line(name, results[name]["init"]), flush=True)
    return 0


def share_line(name: str, share: dict[str, Any]) -> str:
    """`init share NAME: imported/entries (percent) import as written`, or why there is no figure."""
    if "entries" not in share:
        return f"init share {name}: no figure (init exit {share.get('init_exit')}: {share.get('note', '')})"
    frac = f"{share['imported'] / share['entries']:.0%}" if share["entries"] else "-"
    return (f"init share {name}: {share['imported']}/{share['entries']} ({frac}) import as written; init "
            f"{share['init_wall_s']:.0f} s, list --import {share['list_wall_s']:.0f} s")


if __name__ == "__main__":
    raise SystemExit(main())
