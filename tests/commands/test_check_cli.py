"""`kforge-bot check` end to end, as a user runs it: exit codes 0/1/2, the JSON report, the table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data"
SOFTMAX = DATA / "kb" / "softmax.py"
ADV = DATA / "adversarial"
MANIFEST_REPO = DATA / "manifest_repo"


def _check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="200")  # one torch thread: see test_evaluate
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", "check", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("check")
    bad_manifest = tmp / "repo"
    bad_manifest.mkdir()
    (bad_manifest / "kforge.yaml").write_text("kernels:\n  k:\n    file: k.py\n    entry: f\n    inputs: g\n"
                                              "    tolerance: {atol: lots}\n")
    (bad_manifest / "k.py").write_text("def f(x):\n    return x\n\ndef g():\n    return []\n")
    commands = {
        "pass": (SOFTMAX, "--candidate", ADV / "honest.py", "--seeds", "2", "--time-budget", "0.3",
                 "--json", tmp / "pass.json"),
        "incorrect": (SOFTMAX, "--candidate", ADV / "zeros.py", "--seeds", "2", "--no-timing", "--json", "-"),
        "manifest": (MANIFEST_REPO / "kernels" / "rmsnorm.py", "--time-budget", "0.3", "--json", "-"),
        "aa": (SOFTMAX, "--seeds", "2", "--no-timing"),
        "compile_error": (SOFTMAX, "--candidate", ADV / "syntax_error.py", "--no-timing", "--json", "-"),
        "timeout": (SOFTMAX, "--candidate", ADV / "hang.py", "--no-timing", "--timeout", "3", "--json", "-"),
        # configuration and usage errors: exit 2 before any worker starts
        "no_modelnew": (SOFTMAX, "--candidate", MANIFEST_REPO / "kernels" / "rmsnorm.py"),
        "missing_file": (DATA / "kb" / "nope.py",),
        "which_kernel": (MANIFEST_REPO / "kforge.yaml",),
        "bad_manifest": (bad_manifest / "k.py",),
        "bad_target": (SOFTMAX, "--target", "tpu"),
        "bad_seeds": (SOFTMAX, "--seeds", "0"),
        "kernel_on_kernelbench": (SOFTMAX, "--kernel", "foo"),
    }
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(_check, *args) for name, args in commands.items()}
        results = {name: f.result() for name, f in futures.items()}
    results["pass_json"] = (tmp / "pass.json").read_text() if (tmp / "pass.json").exists() else ""  # type: ignore
    return results


def _json(run: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(run.stdout)


@pytest.mark.slow
def test_a_correct_candidate_exits_0_with_the_full_report(runs: dict) -> None:
    run = runs["pass"]
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(runs["pass_json"])
    assert report["verdict"] == "pass" and report["correct"] is True
    assert report["reason"].startswith("correct on every case")
    for side in ("baseline", "candidate"):
        stats = report[side]
        assert set(stats) >= {"median_ms", "q1_ms", "q3_ms", "min_ms", "samples", "spread"}
        assert stats["median_ms"] > 0 and stats["samples"] >= 1
    assert report["speedup"] > 0
    assert report["speedup_ci"] is None or (len(report["speedup_ci"]) == 2
                                            and report["speedup_ci"][0] <= report["speedup"] <= report["speedup_ci"][1])
    assert report["target"] == "cpu" and report["device_name"]
    assert report["kernel"] == "softmax" and report["format"] == "kernelbench"
    assert report["comparison"] == "honest.py:ModelNew vs softmax.py:Model"
    assert report["correctness"]["cases_checked"] >= 3 and report["correctness"]["timed_outputs_checked"] == 3
    # the human table went to stdout as well (the JSON went to a file)
    assert "verdict" in run.stdout and "pass" in run.stdout and "speedup (95% CI)" in run.stdout
    assert "reason: correct on every case" in run.stdout


@pytest.mark.slow
def test_an_incorrect_candidate_exits_1_and_says_why(runs: dict) -> None:
    run = runs["incorrect"]
    assert run.returncode == 1, run.stderr
    report = _json(run)  # --json -: stdout is the JSON and nothing else
    assert report["verdict"] == "incorrect" and report["correct"] is False
    assert "output 0:" in report["reason"] and "elements outside" in report["reason"]
    assert report["speedup"] is None and report["speedup_ci"] is None
    assert report["baseline"] is None and report["candidate"] is None


@pytest.mark.slow
def test_compile_errors_and_hangs_exit_1(runs: dict) -> None:
    run = runs["compile_error"]
    assert run.returncode == 1
    assert _json(run)["verdict"] == "compile_error" and "SyntaxError" in _json(run)["reason"]
    run = runs["timeout"]
    assert run.returncode == 1
    assert _json(run)["verdict"] == "timeout" and "timed out after 3 s" in _json(run)["reason"]


@pytest.mark.slow
def test_a_manifest_kernel_is_checked_against_its_reference(runs: dict) -> None:
    run = runs["manifest"]
    assert run.returncode == 0, run.stderr
    report = _json(run)
    assert report["kernel"] == "rmsnorm" and report["format"] == "manifest"
    assert report["comparison"] == "kernels/rmsnorm.py:rmsnorm vs reference reference.py:rmsnorm_reference"
    assert report["verdict"] == "pass"
    assert [t["shape_set"] for t in report["details"]["timing"]] == [0, 1]
    assert report["correctness"]["shape_sets"] == [{"rows": 64, "cols": 128}, {"rows": 16, "cols": 512}]


@pytest.mark.slow
def test_without_a_candidate_a_kernelbench_problem_runs_against_itself(runs: dict) -> None:
    run = runs["aa"]
    assert run.returncode == 0, run.stdout + run.stderr
    assert "softmax.py: Model vs itself (A/A: no candidate given)" in run.stdout
    assert "pass" in run.stdout
    # The held-out variants (evaluate.wire.heldout): checked, never listed, never timed.
    assert "held-out: 2 of 2 variant(s) checked" in run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name,needle", [
    ("no_modelnew", "rmsnorm.py: defines no class ModelNew"),
    ("missing_file", "nope.py: file not found"),
    ("which_kernel", "manifest has 2 kernels; choose one with --kernel (rmsnorm, scale)"),
    ("bad_manifest", "kforge.yaml: kernels.k.tolerance: expected {atol: number, rtol: number}"),
    ("bad_target", "'tpu': use auto, a device kind"),
    ("bad_seeds", "--seeds"),
    ("kernel_on_kernelbench", "--kernel 'foo': this is a KernelBench problem"),
])
def test_configuration_and_usage_errors_exit_2_with_one_line(runs: dict, name: str, needle: str) -> None:
    run = runs[name]
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert needle in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    if name not in ("bad_target", "bad_seeds"):  # click prints its own usage block for those
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert run.stderr.startswith("kforge-bot: error: ")


@pytest.mark.slow
def test_check_all_judges_every_managed_kernel_a_line_each(tmp_path: Path) -> None:
    """`check --all REPO`: each kernel against its reference; one whose reference fails is that kernel's error
    (the others still run) and makes the exit status 1; a kernel for another device is skipped, named."""
    repo = tmp_path / "repo"
    (repo / "problems").mkdir(parents=True)
    (repo / "problems" / "softmax.py").write_text(SOFTMAX.read_text())
    broken = SOFTMAX.read_text().replace("def get_inputs():", "def get_inputs():\n    raise ValueError('no inputs today')")
    (repo / "problems" / "broken.py").write_text(broken)
    (repo / "kforge.yaml").write_text("kernels:\n  gpu_only:\n    file: problems/softmax.py\n    entry: Model\n"
                                      "    inputs: problems/softmax.py:get_inputs\n    targets: [cuda]\n")
    proc = _check("--all", repo, "--target", "cpu", "--seeds", "2", "--no-timing", "--json", tmp_path / "all.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "problems/softmax.py: pass: correct on every case" in lines
    assert any(line.startswith("problems/broken.py: error: ") and "no inputs today" in line for line in lines)
    assert "gpu_only: skipped: the kernel does not run on cpu (its targets: cuda)" in lines
    assert lines[-1] == "3 kernel(s): 1 correct, 1 not, 1 skipped (no cpu target)"
    progress = [line.split(" (")[0] for line in proc.stderr.splitlines() if line.startswith("[")]
    assert progress == ["[1/3] gpu_only", "[2/3] problems/broken.py", "[3/3] problems/softmax.py"], proc.stderr
    report = json.loads((tmp_path / "all.json").read_text())
    assert [k["verdict"] for k in report["kernels"]] == ["skipped", "error", "pass"]
    usage = _check("--all", repo, "--candidate", SOFTMAX)
    assert usage.returncode == 2 and "--all checks each kernel as written against its reference" in usage.stderr


@pytest.mark.slow
def test_the_console_says_what_each_number_is_and_keeps_lines_whole_in_a_pipe() -> None:
    import re

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe, rich's 80-column default
    proc = subprocess.run([sys.executable, "-m", "kforge_bot.cli", "check", str(SOFTMAX), "--candidate",
                           str(ADV / "honest.py"), "--seeds", "2", "--time-budget", "0.3"], cwd=ROOT,
                          env=dict(env, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "speedup: the median of per-pair ratios (baseline / candidate, each pair timed back to back)" in lines
    correctness = next(line for line in lines if line.startswith("correctness: "))
    assert len(correctness) > 80 and "max relative error" in correctness  # one line, not folded at 80 columns
    total, parts = re.match(r"correctness: (\d+) outputs compared \((.*)\), max abs", correctness).groups()
    counts = [int(re.match(r"(\d+)", p.strip()).group(1)) for p in parts.split(",")]
    assert sum(counts) == int(total) and "2 seed(s) x 1 shape set(s)" in parts
    assert "(median)" in proc.stdout  # the timing columns say they are medians


def test_check_all_that_skipped_every_kernel_exits_1_saying_nothing_was_checked(tmp_path: Path) -> None:
    """A CI job on a machine without the kernels' device must not be green forever."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "kernel.py").write_text("import torch\n\n\ndef double(x):\n    return x * 2\n\n\n"
                                    "def make_inputs():\n    return [torch.randn(8)]\n")
    (repo / "kforge.yaml").write_text("kernels:\n  gpu_only:\n    file: kernel.py\n    entry: double\n"
                                      "    inputs: make_inputs\n    targets: [cuda]\n")
    proc = _check("--all", repo, "--target", "cpu", "--no-timing", "--json", tmp_path / "all.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == ("error: nothing was checked: all 1 kernel(s) were skipped on target cpu (the kernel does not "
                         "run on cpu (its targets: cuda)); run on a machine with their device, or pass --target")
    assert json.loads((tmp_path / "all.json").read_text())["nothing_checked"] == lines[-1]


@pytest.mark.slow
def test_check_runs_a_src_layout_library_kernel_in_the_sandbox(tmp_path: Path) -> None:
    """Only the manifest's folder was on the workers' path: a package under src/ gave ModuleNotFoundError there.
    With `import_roots: [src]` the kernel, its launcher in another file and its package import in the worker."""
    from kforge_bot.evaluate import isolation as sandboxing

    if not sandboxing.probe().available:
        pytest.skip(f"no sandbox on this machine: {sandboxing.probe().describe()}")
    proc = _check(DATA / "library_repo" / "kforge.yaml", "--kernel", "swiglu", "--no-timing", "--seeds", "2",
                  "--allow-fallback", "--isolation", "required")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "src/minilib/ops/act.py:swiglu vs reference references.py:swiglu" in proc.stdout
    assert "isolation: sandboxed" in proc.stderr
    # A candidate for the kernel's file (which does not define the entry: its launcher does) is what runs.
    wrong = tmp_path / "act.py"
    wrong.write_text((DATA / "library_repo" / "src" / "minilib" / "ops" / "act.py").read_text()
                     .replace("silu(a) * b", "silu(b) * a"))
    proc = _check(DATA / "library_repo" / "kforge.yaml", "--kernel", "swiglu", "--candidate", wrong, "--no-timing",
                  "--seeds", "2", "--allow-fallback", "--isolation", "required")
    assert proc.returncode == 1 and "incorrect" in proc.stdout, proc.stdout + proc.stderr


def test_a_figure_that_leaves_out_launches_is_printed_beside_the_eager_one() -> None:
    from kforge_bot.check.render import launch_bound_notes
    launch_bound = {"shape_set": 0, "mode": "cuda_graph",
                    "per_call_ms": {"baseline": {"eager": 2.0, "device": 0.5, "host_issue": 1.9},
                                    "candidate": {"eager": 1.0, "device": 0.25, "host_issue": 0.9}}}
    device_bound = {"shape_set": 1, "mode": "eager",
                    "per_call_ms": {"baseline": {"eager": 5.01, "device": 5.0, "host_issue": 0.1},
                                    "candidate": {"eager": 2.5, "device": 2.49, "host_issue": 0.1}}}
    notes = launch_bound_notes([launch_bound, device_bound, {"shape_set": 2}])
    assert len(notes) == 1 and "shape set 0" in notes[0]
    assert "replayed from CUDA graphs" in notes[0] and "2.000x" in notes[0]


@pytest.mark.slow
def test_the_reason_names_a_shape_set_far_slower_and_the_table_shows_each(tmp_path: Path) -> None:
    """A candidate far faster on its large shape set and far slower on its small one: the headline (the geometric
    mean) may read faster, but the reason names the slow set, and every set is printed and in the JSON."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from fakes.gate_repos import REF, SLOW_ON_LARGE, SLOW_ON_SMALL, shaped_manifest

    (tmp_path / "ref.py").write_text(REF)
    (tmp_path / "mm.py").write_text(SLOW_ON_LARGE)
    (tmp_path / "kforge.yaml").write_text(shaped_manifest("mm", [16, 128]))
    (tmp_path / "fast_on_large.py").write_text(SLOW_ON_SMALL)
    proc = _check(tmp_path / "kforge.yaml", "--candidate", tmp_path / "fast_on_large.py", "--seeds", "2",
                  "--time-budget", "2", "--allow-fallback", "--json", tmp_path / "report.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # correct: check's exit status is about correctness
    report = json.loads((tmp_path / "report.json").read_text())
    assert "but a regression on shape set 0 (n=16)" in report["reason"], report["reason"]
    assert "shape set 1" not in report["reason"].split("but a regression on")[1]
    assert [(p["shape_set"], p["regression"]) for p in report["per_shape"]] == [(0, True), (1, False)]
    assert report["details"]["speedup_definition"].startswith("speedup = the geometric mean over the shape sets")
    lines = proc.stdout.splitlines()
    assert any(line.startswith("  shape set 0 (n=16): ") and line.endswith("regression (over 5.0% slower)")
               for line in lines), proc.stdout
    assert any(line.startswith("  shape set 1 (n=128): ") for line in lines)
    assert "(median, geomean)" in proc.stdout
    assert any(line.startswith("speedup = the geometric mean") for line in lines)


def test_a_json_path_that_will_be_refused_is_refused_before_the_evaluation(tmp_path: Path) -> None:
    """A folder, a file that is not .json (the next word taken as the path), a path under a file: each refused at
    once with one line and exit 2, before any worker starts (the sandbox announcement comes first when one does)."""
    not_json = tmp_path / "kernel.py"
    not_json.write_text("print('mine')\n")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x\n")
    targets = [tmp_path, not_json, a_file / "report.json"]
    if os.geteuid() != 0:  # root may write anywhere; as any other user a read-only folder is refused too
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        targets.append(locked / "report.json")
    for target in targets:
        proc = _check(SOFTMAX, "--candidate", ADV / "honest.py", "--time-budget", "0.3", "--json", target)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.startswith("kforge-bot: error: ") and len(proc.stderr.strip().splitlines()) == 1
        assert "isolation:" not in proc.stderr and proc.stdout == ""  # nothing ran
    assert not_json.read_text() == "print('mine')\n"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="torch.compile on the CPU needs g++ (inductor)")
def test_check_reports_each_figure_against_its_baseline(tmp_path: Path) -> None:
    """--baseline compile: the figure against eager, against torch.compile (or why it was dropped), and against the
    faster of the two, each named, in the table's text and in the JSON report."""
    report = tmp_path / "report.json"
    done = _check(DATA / "baselines" / "scale.py", "--candidate", DATA / "baselines" / "scale_new.py",
                  "--baseline", "compile", "--seeds", "2", "--time-budget", "0.5", "--timeout", "240",
                  "--json", report)
    assert done.returncode == 0, done.stdout + done.stderr
    baselines = json.loads(report.read_text())["details"]["baselines"]
    assert baselines["compile"]["verdict"] == "pass" and baselines["compile"]["used"], baselines["compile"]
    assert baselines["compile"]["per_shape"][0]["speedup_over_eager"] > 0
    assert baselines["compile"]["against"]["speedup"] > 0
    assert set(baselines["best"]["faster_of"].values()) <= {"eager", "compile"}
    assert "against eager (the kernel as written): " in done.stdout
    assert "against torch.compile (default): " in done.stdout
    assert "against the faster of eager and compile (the KForge paper's metric): " in done.stdout


@pytest.mark.slow
def test_check_takes_a_gpumode_problem_folder_as_it_is(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    problem = DATA / "gpumode" / "scaled_add_py"
    done = _check(problem, "--candidate", problem / "submission.py", "--seeds", "2", "--time-budget", "0.3",
                  "--json", report)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text())
    assert data["format"] == "gpumode" and data["verdict"] == "pass"
    assert data["comparison"] == "submission.py:custom_kernel vs scaled_add_py/reference.py:ref_kernel"
    assert [t["shape_set"] for t in data["details"]["timing"]] == [2]  # the benchmark, not the tests
    wrong = _check(problem / "task.yml", "--candidate", DATA / "gpumode" / "candidates" / "near_miss.py",
                   "--seeds", "2", "--no-timing")
    assert wrong.returncode == 1 and "check_implementation failed" in wrong.stdout


def _settings_check_evaluates_with(monkeypatch: pytest.MonkeyPatch, *args: str | Path) -> tuple[object, dict]:
    """The EvalSettings `check` ran its (real) evaluation with, and its JSON report."""
    from click.testing import CliRunner

    from kforge_bot.cli import cli
    from kforge_bot.evaluate import session as evaluation_session

    seen: list[object] = []
    real = evaluation_session.evaluate

    def evaluate(spec, candidate, target, settings, **kwargs):  # the real evaluation, its settings noted
        seen.append(settings)
        return real(spec, candidate, target, settings, **kwargs)

    monkeypatch.setattr(evaluation_session, "evaluate", evaluate)  # what check's session runs
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result = CliRunner().invoke(cli, ["check", *map(str, args), "--json", "-"])
    assert result.exit_code == 0, result.output
    assert len(seen) == 1
    return seen[0], json.loads(result.stdout[result.stdout.index("{"):])


@pytest.mark.slow
def test_check_evaluates_with_the_policys_seeds_timing_budget_and_timeout(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: `check --policy FILE` ignored the policy's evaluation section (it took the kernel's seeds, 3 s of
    timing and a 300 s timeout whatever the file said). Now the file decides, and a flag overrides it."""
    policy = tmp_path / "policy.yml"
    policy.write_text("evaluation:\n  seeds: 1\n  timing_budget_s: 0.25\n  timeout_s: 120\n")
    settings, report = _settings_check_evaluates_with(monkeypatch, SOFTMAX, "--candidate", ADV / "honest.py",
                                                      "--policy", policy)
    assert (settings.seeds, settings.timing_budget_s, settings.timeout_s) == (1, 0.25, 120)
    assert len(report["correctness"]["seeds"]) == 1  # the evaluation really drew the policy's one seed
    settings, report = _settings_check_evaluates_with(monkeypatch, SOFTMAX, "--candidate", ADV / "honest.py",
                                                      "--policy", policy, "--seeds", "2", "--timing-budget", "0.3",
                                                      "--timeout", "100")
    assert (settings.seeds, settings.timing_budget_s, settings.timeout_s) == (2, 0.3, 100)
    assert len(report["correctness"]["seeds"]) == 2


@pytest.mark.slow
def test_check_without_a_policy_takes_a_quick_look_and_the_old_flag_still_works(monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    """No --policy: the kernel's own seeds and 3 s of timing (not the default policy's 10 s). `--time-budget`, the
    timing budget's earlier name, is a hidden alias that still sets it; the help shows only --timing-budget."""
    settings, _ = _settings_check_evaluates_with(monkeypatch, SOFTMAX, "--candidate", ADV / "honest.py",
                                                 "--no-timing")
    assert (settings.seeds, settings.timing_budget_s, settings.timeout_s) == (None, 3.0, 300.0)
    settings, _ = _settings_check_evaluates_with(monkeypatch, SOFTMAX, "--candidate", ADV / "honest.py",
                                                 "--no-timing", "--time-budget", "0.4")
    assert settings.timing_budget_s == 0.4
    from click.testing import CliRunner

    from kforge_bot.cli import cli

    shown = CliRunner().invoke(cli, ["check", "--help"]).output
    assert "--timing-budget" in shown and "--time-budget" not in shown


@pytest.mark.slow
def test_a_correct_kernel_whose_timing_was_disturbed_is_inconclusive_and_exits_1(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/cli.md: `inconclusive` (correct, timing disturbed) is no pass, so `check` exits 1. The evaluation is real;
    only the disturbance detector's answer is scripted, as a busy machine gives it (the issue-39 walk saw it there)."""
    from click.testing import CliRunner

    from kforge_bot.cli import cli
    from kforge_bot.evaluate.wire import conditions

    monkeypatch.setattr(conditions, "disturbance", lambda sides, limits=None: "scripted: other work preempted a side")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result = CliRunner().invoke(cli, ["check", str(SOFTMAX), "--candidate", str(ADV / "honest.py"),
                                      "--timing-budget", "0.3", "--json", "-"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["verdict"] == "inconclusive" and report["correct"] is False
    assert report["reason"].startswith("timing disturbed: scripted: other work preempted a side")
    assert "correct on every case" in report["reason"]
