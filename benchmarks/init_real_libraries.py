"""`kforge-bot init` on real kernel libraries, read-only: what it proposes and what it avoids.

Give it checkouts of public libraries (fetched beforehand; nothing is fetched here and nothing is written
into them). For each, it runs init's proposal in this process (init only reads files) and counts: entries
proposed, launchers left out in other vendors' folders, helpers beside the kernels that did not become
entries, references / inputs / shapes read from the library's tests, backward launchers noted, kernels no
public function launches; and from the proposed YAML, entries still in an unsupported vendor's folder and
names with numeric suffixes (both must be 0). With `--baseline CHECKOUT`, the same counts for another
kforge-bot checkout's init (run in a subprocess with that checkout first on sys.path), for comparison.

    python benchmarks/init_real_libraries.py /tmp/Liger-Kernel /tmp/FlagGems --baseline /work/main \\
        --out benchmarks/results/init_real_libraries.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from kforge_bot.init.propose import propose_library  # noqa: E402
from kforge_bot.init.scan.launchers import CallGraph  # noqa: E402
from kforge_bot.init.scan.modules import Library  # noqa: E402
from kforge_bot.init.scan.vendors import vendor_of, vendor_target  # noqa: E402

_BASELINE = ("import json, sys; from pathlib import Path; from kforge_bot.commands.init import propose; "
             "text, n = propose(Path(sys.argv[1]).resolve()); print(json.dumps({'text': text, 'n': n}))")


def yaml_counts(text: str, launchers: set[tuple[str, str]]) -> dict[str, int]:
    kernels = (yaml.safe_load(text) or {}).get("kernels") or {}
    entries = [(name, e) for name, e in kernels.items() if isinstance(e, dict)]
    in_vendor = [n for n, e in entries if (v := vendor_of(str(e.get("file", "")))) and vendor_target(v) is None]
    return {
        "entries": len(entries),
        "entries_in_unsupported_vendor_folders": len(in_vendor),
        "names_with_numeric_suffix": sum(1 for n, _ in entries if re.search(r"_\d+$", str(n))),
        "entries_that_launch_no_kernel": sum(1 for _, e in entries if (e.get("file"), e.get("entry")) not in launchers
                                             and not str(e.get("entry", "")).startswith("TODO")),
        "entries_with_a_reference": sum(1 for n, e in entries if "TODO" not in _entry_text(text, str(n), "reference")),
    }


def _entry_text(text: str, name: str, key: str) -> str:
    block = text.split(f"\n  {name}:", 1)[-1].split("\n  ", 1)[0] if f"\n  {name}:" in text else ""
    line = next((ln for ln in text.split(f"\n  {name}:", 1)[-1].splitlines() if ln.strip().startswith(f"{key}:")), "")
    return line or block


def run(given: Path, baseline: Path | None) -> dict[str, object]:
    library = given.resolve()
    started = time.perf_counter()
    proposal = propose_library(library)
    seconds = time.perf_counter() - started
    files = [p for p in library.rglob("*.py") if ".git" not in p.parts]
    graph = CallGraph.build(Library.read(library, files))
    launchers = {(la.module.rel, la.symbol) for la in graph.launchers()[0]}
    row: dict[str, object] = {"library": given.name, "python_files": len(files), "seconds": round(seconds, 1),
                              "counts": dict(proposal.counts), "yaml": yaml_counts(proposal.manifest, launchers)}
    if baseline is not None:
        out = subprocess.run([sys.executable, "-c", _BASELINE, str(library)], capture_output=True, text=True,
                             cwd=baseline, env={"PYTHONPATH": str(baseline), "PATH": "/usr/bin:/bin"}, check=True)
        row["baseline_yaml"] = yaml_counts(json.loads(out.stdout)["text"], launchers)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("libraries", nargs="+", type=Path)
    parser.add_argument("--baseline", type=Path, default=None, help="another kforge-bot checkout to compare with")
    parser.add_argument("--revision", action="append", default=[], help="LIB=COMMIT, recorded in the results")
    parser.add_argument("--out", type=Path, default=None, help="write the results as Markdown (and .json beside)")
    args = parser.parse_args()
    rows = [run(lib, args.baseline) for lib in args.libraries]
    print(json.dumps(rows, indent=2))
    if args.out is not None:
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n")
        args.out.write_text(markdown(rows, args.revision, args.baseline))


def markdown(rows: list[dict], revisions: list[str], baseline: Path | None) -> str:
    keys = ["entries", "vendor_entries_skipped", "helpers_avoided", "references_from_tests", "inputs_from_tests",
            "shapes_from_tests", "backward_launchers", "kernels", "kernels_launched",
            "kernels_without_public_launcher", "kernels_never_launched"]
    lines = [f"# `kforge-bot init` on real kernel libraries ({dt.date.today().isoformat()}, {platform.node()}, "
             f"{platform.processor() or platform.machine()}, Python {platform.python_version()})", "",
             "Read-only: each library checked out from the fetched mirror into a temporary folder; nothing written "
             "into it. Revisions: " + (", ".join(revisions) or "not recorded") + ".", "",
             "| count | " + " | ".join(r["library"] for r in rows) + " |", "|---|" + "---|" * len(rows)]
    for key in keys:
        lines.append(f"| {key} | " + " | ".join(str(r["counts"].get(key, 0)) for r in rows) + " |")
    for key in ("entries_in_unsupported_vendor_folders", "names_with_numeric_suffix", "entries_that_launch_no_kernel",
                "entries_with_a_reference"):
        lines.append(f"| yaml: {key} | " + " | ".join(str(r["yaml"][key]) for r in rows) + " |")
    lines.append("| seconds | " + " | ".join(str(r["seconds"]) for r in rows) + " |")
    if baseline is not None:
        lines += ["", f"The same counts for the init before this change (`{baseline}`):", "",
                  "| count | " + " | ".join(r["library"] for r in rows) + " |", "|---|" + "---|" * len(rows)]
        for key in rows[0]["baseline_yaml"]:
            lines.append(f"| {key} | " + " | ".join(str(r["baseline_yaml"][key]) for r in rows) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
