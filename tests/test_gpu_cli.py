"""The cuda target end to end, as a user runs it: `check`, `optimize` (built-in tuner) and `gate` on the
bundled examples, each through the CLI in its own process.

Marked `gpu` (skipped without a CUDA device). With KFORGE_GPU_RESULTS=FILE each test appends its figures as
one JSON line, which benchmarks/run_h200.sh collects into the results folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KFORGE_MODEL"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(GIT_AUTHOR_NAME="dev", GIT_AUTHOR_EMAIL="dev@example.com", GIT_COMMITTER_NAME="dev",
               GIT_COMMITTER_EMAIL="dev@example.com")
    return env


def _cli(*args: str, cwd: Path | None = None, timeout: float = 400,
         github_actions: bool = False) -> tuple[subprocess.CompletedProcess[str], float]:
    env = _env()
    if github_actions:  # annotations (::error file=...) are written only inside Actions
        env.update(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=os.devnull)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kforge_bot", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc, time.monotonic() - start


def _record(test: str, **figures: Any) -> None:
    path = os.environ.get("KFORGE_GPU_RESULTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"test": test, **figures}, default=str) + "\n")


def test_check_cli_on_a_bundled_triton_example(tmp_path):
    proc, wall = _cli("check", str(EXAMPLES / "kforge.yaml"), "--kernel", "rmsnorm_triton", "--target", "cuda",
                      "--time-budget", "1", "--json", str(tmp_path / "check.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["verdict"] == "pass", report.get("reason")
    lo, hi = report["speedup_ci"]
    assert lo <= report["speedup"] <= hi
    _record("check rmsnorm_triton (the example against its torch reference)", wall_s=round(wall, 1),
            verdict=report["verdict"], speedup=report["speedup"], ci=report["speedup_ci"],
            device=report.get("device_name"))


def test_optimize_cli_with_the_tuner_finds_a_faster_rmsnorm(tmp_path):
    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work)
    proc, wall = _cli("optimize", str(work / "kforge.yaml"), "--kernel", "rmsnorm_triton", "--target", "cuda",
                      "--iterations", "2", "--report", str(tmp_path / "run"), "--out", str(tmp_path / "best.py"),
                      "--counters", "off")  # the tuner alone; the counters have their own test below
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "built-in tuner" in proc.stdout + proc.stderr
    assert (tmp_path / "run" / "report.md").is_file()
    # The example is written with NUM_WARPS = 1; on an H200 2 and 4 warps were 1.1x and 1.29x faster.
    best = (tmp_path / "best.py").read_text()
    assert "NUM_WARPS = 1\n" not in best
    summary = [line for line in proc.stdout.splitlines() if line.startswith("best:")]
    _record("optimize rmsnorm_triton --iterations 2 (built-in tuner)", wall_s=round(wall, 1),
            best=summary[-1] if summary else None,
            change=next((line for line in best.splitlines() if line.startswith("NUM_WARPS")), None))


@pytest.mark.skipif(shutil.which("ncu") is None and not os.environ.get("KFORGE_NCU"), reason="needs ncu (Nsight Compute)")
def test_optimize_writes_the_hardware_counters_before_and_after(tmp_path):
    """Issue 14's done-when: optimize on the bundled Triton RMSNorm writes ncu-details.csv for the kernel as
    written and the best candidate, and the report shows the before/after table."""
    import csv

    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work)
    run = tmp_path / "run"
    proc, wall = _cli("optimize", str(work / "kforge.yaml"), "--kernel", "rmsnorm_triton", "--target", "cuda",
                      "--iterations", "2", "--report", str(run), "--out", str(tmp_path / "best.py"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    events = [json.loads(line) for line in (run / "trajectory.jsonl").read_text().splitlines()]
    counters = [e for e in events if e["event"] == "counters"]
    assert counters and counters[0]["iteration"] == 0 and counters[0].get("available"), counters[:1]
    rows = list(csv.DictReader((run / "ncu-details.csv").open()))
    sides = {r["side"] for r in rows}
    assert "before" in sides and len(sides) == 2, sides  # the tuner's NUM_WARPS 1 -> 4 was accepted before
    report = (run / "report.md").read_text()
    assert "## Hardware counters (Nsight Compute)" in report and "| before |" in report
    _record("optimize rmsnorm_triton --iterations 2 with counters", wall_s=round(wall, 1),
            counters_s=[c.get("wall_s") for c in counters],
            before={k: rows[0].get(k) for k in ("kernel", "duration_us", "dram_throughput_pct", "achieved_occupancy_pct")},
            after={k: rows[-1].get(k) for k in ("kernel", "duration_us", "dram_throughput_pct", "achieved_occupancy_pct")})


def test_gate_cli_fails_a_slowed_kernel_and_passes_an_unrelated_change(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES, repo)
    # rmsnorm is in tinylm's workloads too (docs/workloads.md): a bounded budget for them keeps this test's time.
    (repo / "policy.yml").write_text("version: 1\ngate:\n  workloads: {budget_s: 60, max_pairs: 8}\n")
    git = ["git", "-C", str(repo)]
    env = _env()
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True, env=env)
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "examples"], check=True, env=env)
    kernel = repo / "triton" / "rmsnorm.py"
    text = kernel.read_text()
    slowed = text.replace("    out = torch.empty_like(x)\n",
                          "    x = x.clone()  # an extra read and write of the input\n    out = torch.empty_like(x)\n")
    assert slowed != text
    kernel.write_text(slowed)
    subprocess.run([*git, "commit", "-qam", "rmsnorm: copy the input first"], check=True, env=env)
    proc, wall = _cli("gate", "--base", "HEAD~1", "--head", "HEAD", "--target", "cuda", "--repo", str(repo),
                      "--policy", str(repo / "policy.yml"), "--json", str(tmp_path / "gate.json"), "--no-cache",
                      github_actions=True)
    report = json.loads((tmp_path / "gate.json").read_text())
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    verdicts = {k["name"]: k for k in report["kernels"]}
    assert verdicts["rmsnorm_triton"]["verdict"] == "regression", verdicts
    assert "::error file=" in proc.stdout and "rmsnorm.py" in proc.stdout
    workloads = {w["name"]: w for w in report["workloads"]}
    assert set(workloads) == {"tinylm_prefill", "tinylm_decode"}, workloads  # both import the changed kernel
    slowed_figures = {"wall_s": round(wall, 1), "change": verdicts["rmsnorm_triton"]["change"],
                      "workloads": {n: {"verdict": w["verdict"], "change": w["change"], "pairs": w["pairs"],
                                        "noise_floor": w["noise_floor"]} for n, w in workloads.items()}}

    (repo / "README.txt").write_text("an unrelated change\n")
    subprocess.run([*git, "add", "README.txt"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "docs"], check=True, env=env)
    proc, wall_unrelated = _cli("gate", "--base", "HEAD~1", "--head", "HEAD", "--target", "cuda", "--repo",
                                str(repo), "--policy", str(repo / "policy.yml"), "--json", str(tmp_path / "gate2.json"),
                                "--no-cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads((tmp_path / "gate2.json").read_text())["kernels"] == []
    _record("gate: rmsnorm_triton made to copy its input (base vs head)", regression=slowed_figures,
            unrelated_commit={"wall_s": round(wall_unrelated, 1), "exit": proc.returncode})
