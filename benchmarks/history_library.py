"""A public Triton library's last commits through the performance history (issue 43): `track` at each, `history`
(series, change points, the dashboard), `history --alert` (each open regression re-measured and bisected; no token,
so no issue is filed) and `bisect` between the first and the last commit, as a user would run them.

The library is never part of this repository: give a git checkout of it (`--library`, e.g. a carried
`.libs/Liger-Kernel`). A scratch repository gets one commit per library commit (its last `--commits` first-parent
commits that touch `--paths`, oldest first: the library's `src/` at that commit plus the example manifest,
examples/libraries/liger-kernel/), each with the library commit's sha and subject as its message.

    python3 benchmarks/history_library.py --library .libs/Liger-Kernel --commits 20 --kernels rms_norm --out $OUT

Writes under --out: history_library.md (machine, date, commits, series, change points, bisections, wall times),
history_library.json (every step's output), history.json (`history --json`), site.tar.gz (the dashboard) and
history.bundle (the scratch repository with refs/kforge/history: `git clone history.bundle x && cd x &&
git fetch ../history.bundle refs/kforge/history:refs/kforge/history && kforge-bot history --remote '' --html site`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from real_library import DEFAULT_MANIFEST, LIBRARY_GIT, git, machine, place_manifest, place_tree, run  # noqa: E402


def library_commits(library: Path, count: int, paths: list[str]) -> list[tuple[str, str]]:
    """(sha, subject) of the library's last `count` first-parent commits touching `paths`, oldest first."""
    out = subprocess.run([*LIBRARY_GIT, "-C", str(library), "log", "--first-parent", f"-{count}", "--format=%H%x09%s",
                          "HEAD", "--", *paths], check=True, capture_output=True, text=True).stdout
    rows = [line.split("\t", 1) for line in out.splitlines() if "\t" in line]
    return [(sha, subject) for sha, subject in reversed(rows)]


def build(library: Path, manifest: Path, paths: list[str], commits: list[tuple[str, str]], repo: Path) -> list[str]:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for sha, subject in commits:
        for child in repo.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        place_tree(library, sha, paths, repo)
        place_manifest(manifest, repo)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"{sha[:10]} {subject}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", default=".libs/Liger-Kernel")
    parser.add_argument("--manifest", default=str(DEFAULT_MANIFEST))
    parser.add_argument("--paths", nargs="+", default=["src"])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--kernels", default="rms_norm", help="comma-separated manifest names")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--time-budget", type=float, default=1.0)
    parser.add_argument("--timeouts", default="420,60,240,240", help="seconds for track, history, alert, bisect")
    parser.add_argument("--out", default=os.environ.get("OUT", "history-out"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    library = Path(args.library).resolve()
    kernels = [k for k in args.kernels.split(",") if k]
    limits = [float(x) for x in args.timeouts.split(",")]
    work = Path(tempfile.mkdtemp(prefix="kforge-history-lib-"))
    commits = library_commits(library, args.commits, args.paths)
    repo = work / "repo"
    shas = build(library, Path(args.manifest).resolve(), args.paths, commits, repo)
    picked = [a for k in kernels for a in ("--kernel", k)]
    common = ["--target", args.target, "--timing-budget", str(args.time_budget)]
    steps: list[dict[str, Any]] = []
    steps.append(run("track", ["track", "--rev", shas[0], "--range", f"{shas[0]}..{shas[-1]}", *picked, *common,
                               "--remote", "", "--json", str(work / "track.json")], repo, limits[0]))
    try:
        import ruptures  # noqa: F401 - change points need it (kforge-bot[history])
    except ImportError:
        print("ruptures is not installed here: history and alert skipped; run them from history.bundle elsewhere")
    else:
        steps.append(run("history", ["history", "--remote", "", "--json", str(out / "history.json"), "--html",
                                     str(work / "site")], repo, limits[1]))
        steps.append(run("alert", ["history", "--remote", "", "--alert", "--json", str(work / "alert.json")], repo,
                         limits[2], env={k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}))
    steps.append(run("bisect", ["bisect", "--good", shas[0], "--bad", shas[-1], *picked, *common[:2],
                                "--timing-budget", str(args.time_budget), "--json", str(work / "bisect.json")],
                     repo, limits[3]))
    if (work / "site").is_dir():
        with tarfile.open(out / "site.tar.gz", "w:gz") as archive:
            archive.add(work / "site", arcname="site")
    subprocess.run(["git", "bundle", "create", str(out / "history.bundle"), "main", "refs/kforge/history"], cwd=repo,
                   capture_output=True)
    loaded = {name: _load(work / f"{name}.json") for name in ("track", "alert", "bisect")}
    history = _load(out / "history.json") or {}
    data = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "library": str(library), "commits": [{"library": c[0], "subject": c[1], "scratch": s}
                                                                       for c, s in zip(commits, shas)],
            "kernels": kernels, "steps": steps, **loaded,
            "change_points": history.get("change_points"), "series": len(history.get("series") or [])}
    (out / "history_library.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    (out / "history_library.md").write_text(summary(data))
    print(summary(data))
    return 0


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def summary(data: dict[str, Any]) -> str:
    lines = [f"# {Path(data['library']).name}: the last {len(data['commits'])} commits through the history", "",
             f"{data['date']}, {data['machine']}; kernels: {', '.join(data['kernels'])}.", "",
             "| step | exit | wall (s) |", "|---|---|---|"]
    lines += [f"| {s['step']} | {s['exit']} | {s['wall_s']} |" for s in data["steps"]]
    lines += ["", f"Series: {data['series']}. Change points past the threshold: {len(data['change_points'] or [])}."]
    for c in data["change_points"] or []:
        lines.append(f"- {c['id']} {c['part']}: {c['size']:+.1%} ({c['before']:.4g} -> {c['after']:.4g}), "
                     f"{c['subject']}")
    for a in (data.get("alert") or {}).get("alerts") or []:
        b = a["bisect"]
        lines.append(f"- re-measured {a['change']['id']}: {b['status']}, first bad {str(b['first_bad'])[:10]}, "
                     f"{b['change']} ({b['measurements']} measurements)")
    for r in (data.get("bisect") or {}).get("results") or []:
        lines.append(f"- bisect {r['kernel']} over {r['commits']} commits: {r['status']}, "
                     f"{r['measurements']} measurements" + (f", first bad {r['first_bad'][:10]} {r['subject']} "
                                                            f"{r['change']}" if r.get("first_bad") else ""))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
