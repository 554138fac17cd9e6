"""A public kernel library as it is, through kforge-bot: `list --import`, `check --all` and the gate between two of
its commits, each kernel's forward and backward verdicts with figures (issue 30).

The library is never part of this repository: give a checkout of it (`--library`, e.g. a carried
`.libs/Liger-Kernel`). The script builds a scratch git repository with two commits, each the library's `src/` at a
revision (`--base`, `--head`; without them, the same tree twice with a comment added to each kernel file in the head:
an A/A gate) plus the example manifest (copied to the root as kforge.yaml, with the files beside it:
examples/libraries/liger-kernel/), then runs the three commands as a user would and writes under --out:
list.json, check_all.json, gate.json and real_library.md (machine, date, each kernel's verdicts and figures).

    python3 benchmarks/real_library.py --library .libs/Liger-Kernel --base v0.5.0 --head main --out $OUT
    python3 benchmarks/real_library.py --library tests/data/library_repo \
        --manifest tests/data/library_repo/kforge.yaml --paths src launch references.py --target cpu   # CPU smoke
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MANIFEST = ROOT / "examples" / "libraries" / "liger-kernel" / "kforge.liger.yaml"
# The library is read only (rev-parse, archive), and may be a carried copy owned by another user.
LIBRARY_GIT = ["git", "-c", "safe.directory=*"]


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="kforge-bench", GIT_AUTHOR_EMAIL="bench@kforge.invalid",
               GIT_COMMITTER_NAME="kforge-bench", GIT_COMMITTER_EMAIL="bench@kforge.invalid")
    return subprocess.run(["git", "-c", "core.hooksPath=/dev/null", *args], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def is_git(path: Path) -> bool:
    """Whether `path` is a repository of its own (a clone's top, or a bare mirror), not a folder inside another
    repository (a plain copy carried inside this one)."""
    def ask(*args: str) -> str:
        proc = subprocess.run([*LIBRARY_GIT, "-C", str(path), "rev-parse", *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    if ask("--is-bare-repository") == "true":
        return (path / ask("--git-dir")).resolve() == path.resolve()
    top = ask("--show-toplevel")
    return bool(top) and Path(top).resolve() == path.resolve()


def place_tree(library: Path, rev: str | None, paths: list[str], dest: Path) -> str:
    """The library's `paths` at `rev` (or as they are on disk) into `dest`; returns what was placed."""
    if rev:
        archive = subprocess.run([*LIBRARY_GIT, "-C", str(library), "archive", rev, *paths], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        short = subprocess.run([*LIBRARY_GIT, "-C", str(library), "rev-parse", "--short", rev], check=True,
                               capture_output=True, text=True).stdout.strip()
        return f"{rev} ({short})"
    for rel in paths:
        source = library / rel
        if source.is_dir():
            shutil.copytree(source, dest / rel, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        elif source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    return "the checkout as it is on disk"


def place_manifest(manifest: Path, dest: Path) -> None:
    """The manifest as dest/kforge.yaml, and the files beside it (references, input makers)."""
    shutil.copy2(manifest, dest / "kforge.yaml")
    for extra in manifest.parent.iterdir():
        if extra.is_file() and extra != manifest and extra.suffix == ".py":
            shutil.copy2(extra, dest / extra.name)


def kernel_files(manifest: Path) -> list[str]:
    import yaml

    data = yaml.safe_load(manifest.read_text())
    return sorted({entry["file"] for entry in data["kernels"].values()})


def build_repo(args: argparse.Namespace, work: Path) -> tuple[Path, dict[str, str]]:
    repo = work / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    library = Path(args.library).resolve()
    # A git repository (a clone, or a bare mirror: `git archive` needs no work tree) gives revisions; a plain
    # folder is taken as it is on disk.
    history = is_git(library)
    base = place_tree(library, (args.base or "HEAD") if history else None, args.paths, repo)
    place_manifest(Path(args.manifest).resolve(), repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    if history and args.head:
        for child in repo.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        head = place_tree(library, args.head, args.paths, repo)
        place_manifest(Path(args.manifest).resolve(), repo)
    else:  # A/A: every kernel file touched (so the gate measures it), nothing it computes changed
        head = base + ", each kernel file with a comment added (A/A)"
        for rel in kernel_files(Path(args.manifest)):
            with open(repo / rel, "a", encoding="utf-8") as handle:
                handle.write("\n# kforge-bot benchmark: head commit (A/A)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "head")
    return repo, {"base": base, "head": head}


def run(step: str, argv: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    started = time.monotonic()
    env = dict(env if env is not None else os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
               COLUMNS="200")
    try:
        proc = subprocess.run([sys.executable, "-m", "kforge_bot.cli", *argv], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
        code, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out += f"\n(stopped after {timeout:g} s)"
    wall = time.monotonic() - started
    print(f"== {step}: exit {code} in {wall:.0f} s\n" + "\n".join(out.strip().splitlines()[-40:]), flush=True)
    return {"step": step, "exit": code, "wall_s": round(wall, 1), "tail": out[-4000:]}


def machine() -> str:
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        name = []
    return f"{name[0] if name else platform.processor() or platform.machine()}, {platform.node()}"


def fmt_speed(speedup: Any, ci: Any) -> str:
    if speedup is None:
        return "-"
    return f"{speedup:.3f}x" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else " (no interval)")


def summary(args: argparse.Namespace, revs: dict[str, str], steps: list[dict[str, Any]], out: Path) -> str:
    name = Path(args.library).resolve()
    name = name.parent if name.name in ("repo", ".git") else name  # a bare mirror's folder says little
    lines = [f"# A real kernel library through kforge-bot ({name.name})", "",
             f"- Machine: {machine()}; target {args.target}",
             f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"- Library: base {revs['base']}; head {revs['head']}",
             f"- Manifest: {_shown(Path(args.manifest))}",
             f"- Command: `python3 benchmarks/real_library.py {' '.join(sys.argv[1:])}`", "",
             "| step | exit | wall |", "|---|---|---|"]
    lines += [f"| {s['step']} | {s['exit']} | {s['wall_s']:.0f} s |" for s in steps]
    listing = _load(out / "list.json")
    if listing:
        lines += ["", "## list --import (each kernel imported in a sandboxed worker)", ""]
        lines += [f"- {k['id']}: {k['imports']}" for k in listing.get("kernels", [])]
    checked = _load(out / "check_all.json")
    if checked:
        lines += ["", "## check --all: each kernel against its reference", "",
                  "| kernel | verdict | speedup (95% CI) | forward | backward | forward+backward | reason |",
                  "|---|---|---|---|---|---|---|"]
        for k in checked.get("kernels", []):
            directions = ((k.get("report") or {}).get("details") or {}).get("directions") or {}
            cells = [fmt_speed((directions.get(d) or {}).get("speedup"), (directions.get(d) or {}).get("speedup_ci"))
                     for d in ("forward", "backward", "forward+backward")]
            reason = str(k.get("reason", "")).replace("|", "/")[:300]
            lines.append(f"| {k['kernel']} | {k['verdict']} | {fmt_speed(k.get('speedup'), k.get('speedup_ci'))} | "
                         + " | ".join(cells) + f" | {reason} |")
        if checked.get("nothing_checked"):
            lines.append(f"\n{checked['nothing_checked']}")
    gate = _load(out / "gate.json")
    if gate:
        lines += ["", f"## gate --all, base {revs['base']} -> head {revs['head']} (exit {gate.get('exit_code')})", "",
                  "| kernel | verdict | change (head/base - 1) | forward | backward | reason |",
                  "|---|---|---|---|---|---|"]
        for k in gate.get("kernels", []):
            d = k.get("directions") or {}
            reason = str(k.get("reason", "")).replace("|", "/")[:300]
            forward, backward = ((d.get(name) or {}).get("change", "-") for name in ("forward", "backward"))
            lines.append(f"| {k['id']} | {k['verdict']} | {k.get('change', '-')} | {forward} | {backward} | {reason} |")
    optimized = out / "optimize_report.md"
    if optimized.is_file():
        lines += ["", f"## optimize {args.optimize_kernel} with the built-in tuner (report.md, as written)", "",
                  *("> " + line for line in optimized.read_text().splitlines()[:60])]
    return "\n".join(lines) + "\n"


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", default=str(ROOT / ".libs" / "Liger-Kernel"), help="a checkout of the library")
    parser.add_argument("--manifest", default=str(DEFAULT_MANIFEST), help="copied to the root as kforge.yaml")
    parser.add_argument("--paths", nargs="+", default=["src"], help="the library's paths the commits hold")
    parser.add_argument("--base", default=None, help="the base revision (default HEAD, in a git checkout)")
    parser.add_argument("--head", default=None, help="the head revision (default: the base again, each kernel "
                                                           "file with a comment added: an A/A gate)")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--time-budget", type=float, default=1.5)
    parser.add_argument("--steps", default="list,check,gate", help="which of list, check, gate, optimize to run")
    parser.add_argument("--timeouts", default="90,240,210,240", help="seconds for list, check, gate, optimize")
    parser.add_argument("--optimize-kernel", default="rms_norm", help="the kernel the optimize step tunes")
    parser.add_argument("--iterations", type=int, default=12, help="the optimize step's candidates, at most")
    parser.add_argument("--out", default=os.environ.get("OUT", "lib-out"))
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not Path(args.library).is_dir():
        print(f"no library checkout at {args.library}: carry one (e.g. .libs/Liger-Kernel) or pass --library")
        return 2
    limits = dict(zip(("list", "check", "gate", "optimize"), (float(t) for t in args.timeouts.split(","))))
    work = Path(tempfile.mkdtemp(prefix="kforge-lib-"))
    steps: list[dict[str, Any]] = []
    try:
        repo, revs = build_repo(args, work)
        budget = ["--time-budget", str(args.time_budget)]
        for step in args.steps.split(","):
            if step == "list":
                steps.append(run("list --import", ["list", str(repo), "--import", "--json", str(out / "list.json")],
                                 repo, limits["list"]))
            elif step == "check":
                steps.append(run("check --all", ["check", "--all", str(repo), "--target", args.target, *budget,
                                                 "--json", str(out / "check_all.json")], repo, limits["check"]))
            elif step == "gate":
                steps.append(run("gate --all", ["gate", "--base", "HEAD~1", "--head", "HEAD", "--all", "--target",
                                                args.target, "--no-cache", *budget, "--json", str(out / "gate.json")],
                                 repo, limits["gate"]))
            elif step == "optimize":  # the built-in tuner (no LLM endpoint here): the kernel's own parameters
                env_free = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
                steps.append(run(f"optimize {args.optimize_kernel}",
                                 ["optimize", "kforge.yaml", "--kernel", args.optimize_kernel, "--target", args.target,
                                  "--iterations", str(args.iterations), "--report", str(work / "report"), "--no-cache"],
                                 repo, limits.get("optimize", 240), env=env_free))
                report = work / "report" / "report.md"
                if report.is_file():
                    shutil.copy2(report, out / "optimize_report.md")
        text = summary(args, revs, steps, out)
        (out / "real_library.md").write_text(text)
        print(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
