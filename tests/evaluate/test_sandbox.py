"""The sandbox: scrubbed environment, private result channel, process-group kill, prompt return."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kforge_bot.evaluate import api
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.plan import Plan
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.channel_reader import _parse
from kforge_bot.evaluate.sandbox import WorkerOutcome, run_worker
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
QUICK = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60)


def test_child_outcome_descriptions() -> None:
    outcome = WorkerOutcome(messages=[{"type": "progress"}, {"type": "result", "n": 1}, {"type": "result", "n": 2}])
    assert outcome.result == {"type": "result", "n": 2}
    assert WorkerOutcome().result is None
    assert "killed by SIGSEGV" == WorkerOutcome(returncode=-signal.SIGSEGV).exit_description()
    assert "killed by SIGKILL" == WorkerOutcome(returncode=-9).exit_description()
    assert "exited with status 3" in WorkerOutcome(returncode=3).exit_description()
    assert "did not finish" == WorkerOutcome().exit_description()
    assert "timed out after 12 s" in WorkerOutcome(timed_out=True, wall_s=12.2).exit_description()


def test_only_lines_with_the_nonce_count() -> None:
    assert _parse(b'{"nonce": "abc", "type": "result"}', "abc") == {"nonce": "abc", "type": "result"}
    assert _parse(b'{"nonce": "abd", "type": "result"}', "abc") is None
    assert _parse(b'{"type": "result", "status": "ok"}', "abc") is None
    assert _parse(b'["abc"]', "abc") is None
    assert _parse(b"not json", "abc") is None
    assert _parse(b"\xff\xfe", "abc") is None


@pytest.mark.slow
def test_reference_worker_gets_a_large_request_on_stdin_and_no_credentials(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_fake_for_test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-for-test")
    # The reference's own inputs function checks what it can see; the request is ~400 KB (far over a pipe
    # buffer), so the parent must feed stdin while it watches the clock.
    problem = tmp_path / "problem.py"
    problem.write_text(textwrap.dedent('''
        import os
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return x.relu()

        def get_inputs():
            leaked = [k for k in os.environ if k in ("GITHUB_TOKEN", "OPENAI_API_KEY")]
            if leaked:
                raise RuntimeError("worker saw " + ",".join(leaked))
            print("inputs made", flush=True)
            return [torch.randn(8, 8)]

        def get_init_inputs():
            return []
    ''') + "# padding\n" * 40_000)
    spec = load_spec(problem)
    work = tmp_path / "work"
    plan = Plan(role="reference", target="cpu", spec=spec, baseline=spec.reference, candidate=None,
                settings=QUICK, seeds=[1, 2], out_dir=work)
    seen: list[dict] = []
    outcome = run_worker(plan.to_dict(), work, timeout_s=60, on_message=seen.append)
    assert outcome.returncode == 0 and not outcome.timed_out
    assert outcome.result is not None and outcome.result["status"] == "ok", outcome.log_tail
    assert seen == outcome.messages and any(m["type"] == "progress" for m in seen)
    assert outcome.forged_lines == 0
    assert "inputs made" in outcome.log_tail  # stdout is kept as a log, and decides nothing
    held_out = ["ref_h0.out", "ref_h1.out"]  # the held-out variants' reference outputs (evaluate.wire.heldout)
    assert sorted(p.name for p in work.glob("ref_*.out")) == ["ref_0_0.out", "ref_0_1.out", *held_out]
    assert not list(work.glob("request*")), "the request (with its seeds) must never be a file"


GRANDCHILD_HANG = '''
import subprocess
import sys
import torch
import torch.nn as nn

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", {token!r}])


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            pass
'''

GRANDCHILD_HOLDS_PIPE = '''
import subprocess
import sys
import torch
import torch.nn as nn

# keep the harness's result pipe open in a grandchild, then leave: the parent must not wait for it
fds = tuple(int(a) for a in sys.argv[1:] if a.isdigit())
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", {token!r}], pass_fds=fds)
raise SystemExit(3)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


def _processes_with(token: str) -> list[int]:
    """Live processes whose command line holds `token` (this test sees every PID namespace's processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "cmdline").read_bytes() and \
                    (entry / "stat").read_text().split(")")[-1].split()[0] not in ("Z", "X"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_hang_and_grandchildren_are_killed_with_the_process_group(tmp_path: Path) -> None:
    spec = load_spec(ADV / "problem.py")
    runs = {}
    for name, template in (("hang", GRANDCHILD_HANG), ("pipe", GRANDCHILD_HOLDS_PIPE)):
        token = f"kforge-grandchild-{name}-{os.getpid()}-{time.monotonic_ns()}"
        runs[name] = (token, Implementation(template.format(token=token), "ModelNew", f"{name}.py", str(tmp_path)))
    # Generous: on a loaded 2-core CI machine a worker can take >8 s just to import torch (the candidate's
    # worker imports it while the reference runs, and its timeout counts from when it gets the candidate).
    settings = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=20)
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(evaluate, spec, impl, "cpu", settings, seeds=[5, 6])
                   for name, (_, impl) in runs.items()}
        results = {name: f.result() for name, f in futures.items()}

    hang = results["hang"]
    assert hang.verdict == "timeout" and "timed out after 20 s" in hang.reason
    pipe = results["pipe"]
    assert pipe.verdict == "crash" and "exited with status 3" in pipe.reason
    # the early exit was reported promptly even though a grandchild still held the pipe open
    assert pipe.details["wall_s"] < 15
    for name, (token, _) in runs.items():
        deadline = time.monotonic() + 5
        while _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _processes_with(token), f"{name}: a grandchild survived the evaluation"
    assert time.monotonic() - started < 90



HANG_AFTER_WARMUP = '''
import torch
import torch.nn as nn

calls = 0


class ModelNew(nn.Module):
    def forward(self, x):
        global calls
        calls += 1
        if calls > 6:  # correctness passed; the timed calls never return
            while True:
                pass
        return torch.softmax(x, dim=1)
'''


@pytest.mark.slow
def test_a_hang_after_a_fast_warm_up_costs_the_no_progress_limit_not_the_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The limit is the floor alone (3 s): 50x the reference's slowest case can exceed it on a loaded machine.
    monkeypatch.setattr(api, "STALL_FACTOR", 0.0)
    spec = load_spec(ADV / "problem.py")
    candidate = Implementation(HANG_AFTER_WARMUP, "ModelNew", "hang_late.py", str(tmp_path))
    settings = EvalSettings(seeds=2, timing_budget_s=5, profile=False, timeout_s=300, stall_floor_s=3)
    started = time.monotonic()
    result = evaluate(spec, candidate, "cpu", settings)
    assert result.verdict == "timeout", result.reason
    assert "made no progress for 3 s once built" in result.reason
    assert time.monotonic() - started < 60  # far under the 300 s timeout
    phases = result.details["phases"]
    assert phases["no_progress_limit_s"] == 3 and phases["parent"]["candidate_worker_s"] < 60


# A lazy build as the host sees one: a compiler run after run for 6 s (load_inline, a Triton JIT, torch.compile),
# then the call. A first call that only sleeps or spins is no build (test_a_first_call_that_builds_nothing_...).
BUILDS_ON_FIRST_CALL = '''
import os
import subprocess
import time

import torch
import torch.nn as nn

built = set()


def build():
    began = time.monotonic()
    while time.monotonic() - began < 6:
        subprocess.run(["cc", "-O2", "-c", "-x", "c", "-", "-o", os.devnull], input=b"int f(int x) {{ return 3 * x; }}",
                       check=True)


class {name}(nn.Module):
    def forward(self, x):
        if x.shape not in built:  # a lazy build on the first call per shape (load_inline, torch.compile, autotune)
            build()
            built.add(x.shape)
        return torch.softmax(x, dim=1)
'''


@pytest.mark.slow
def test_a_first_call_that_builds_is_build_time_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first call per shape set that takes longer than the no-progress limit (here 2 s: a lazy load_inline, a
    torch.compile, an autotune sweep) is build time, bounded by the timeout: the candidate passes, and so does a
    comparison against a baseline that builds on its first call (the base version, in the gate). phases say so."""
    # The limit is the floor alone: 50x the reference's slowest case, on a loaded machine, could outlast the 6 s.
    monkeypatch.setattr(api, "STALL_FACTOR", 0.0)
    spec = load_spec(ADV / "problem.py")
    lazy = Implementation(BUILDS_ON_FIRST_CALL.format(name="ModelNew"), "ModelNew", "lazy.py", str(tmp_path))
    settings = EvalSettings(seeds=2, timing_budget_s=0.5, profile=False, timeout_s=120, stall_floor_s=2,
                            allow_framework_fallback=True)
    result = evaluate(spec, lazy, "cpu", settings)
    assert result.verdict == "pass", result.reason
    phases = result.details["phases"]
    assert phases["no_progress_limit_s"] == 2
    assert phases["candidate_worker"]["first_call_s"]["candidate, shape set 0"] >= 6
    lazy_base = Implementation(BUILDS_ON_FIRST_CALL.format(name="Model"), "Model", "lazy_base.py", str(tmp_path))
    honest = Implementation((ADV / "honest.py").read_text(), "ModelNew", "honest.py", str(tmp_path))
    against = evaluate(spec, honest, "cpu", settings, baseline=lazy_base)
    assert against.verdict == "pass", against.reason
    # The base builds in its own worker (side_workers), before its timing's warm-up.
    assert against.details["phases"]["baseline_worker"]["first_call_s"]["baseline, shape set 0"] >= 6


@pytest.mark.slow
def test_a_first_call_that_builds_nothing_is_a_hang_found_in_seconds_not_at_the_timeout() -> None:
    """A kernel that never returns from its first call: no compiler runs and no file is read or written, so once the
    no-progress limit (here the 3 s floor) passes without either it is a hang, long before the 300 s timeout (an
    H100 judged the same case only at the timeout)."""
    spec = load_spec(ADV / "problem.py")
    settings = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=300, stall_floor_s=3)
    started = time.monotonic()
    result = evaluate(spec, Implementation.from_file(ADV / "hang.py", "ModelNew"), "cpu", settings)
    assert result.verdict == "timeout", result.reason
    assert "hung in a first call: no compiler ran and it read or wrote no files for 3 s" in result.reason
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_every_evaluation_reports_where_its_time_went(tmp_path: Path) -> None:
    spec = load_spec(ADV / "problem.py")
    result = evaluate(spec, Implementation.from_file(ADV / "honest.py", "ModelNew"), "cpu",
                      EvalSettings(seeds=2, timing_budget_s=0.3, profile=False, timeout_s=60))
    assert result.verdict == "pass", result.reason
    phases = result.details["phases"]
    assert set(phases["parent"]) == {"reference_s", "candidate_worker_s", "compare_s", "total_s"}
    assert set(phases["candidate_worker"]) >= {"setup_s", "import_s", "correctness_s", "timing_s"}
    assert set(phases["reference_worker"]) >= {"setup_s", "cases_s", "boot"}
    assert all(v >= 0 for k, v in phases["candidate_worker"].items() if k not in ("boot", "first_call_s"))
    # Each side's first call on the shape set (build time, if it builds), each in its own worker: the candidate's,
    # in correctness; the baseline's, before its timing's warm-up.
    first = phases["candidate_worker"]["first_call_s"]
    assert set(first) == {"candidate, shape set 0", "candidate, held-out variant 0",
                          "candidate, held-out variant 1"} and all(v >= 0 for v in first.values())
    assert set(phases["baseline_worker"]["first_call_s"]) == {"baseline, shape set 0"}
    assert set(phases["baseline_worker"]) >= {"setup_s", "import_s", "timing_s"}
    # Each worker's start, from its own clocks against the parent's: interpreter and imports (and their parts),
    # device warm-up, and which of request and worker waited for the other.
    # A sandboxed CPU worker is forked from the forkserver (evaluate.forked), which imported torch for it.
    forked_here = result.details["isolation"].startswith("sandboxed") and not os.environ.get("KFORGE_BWRAP") \
        and os.environ.get("KFORGE_FORKSERVER") != "0"
    for worker in ("candidate_worker", "baseline_worker", "reference_worker"):
        boot = dict(phases[worker]["boot"])
        assert boot.pop("forked", False) == forked_here, boot
        assert set(boot) == {"boot_s", "warm_up_s", "request_waited_for_worker_s", "worker_waited_for_request_s",
                             "interpreter_s", "torch_import_s", "harness_import_s"}
        assert boot["boot_s"] > 0 and all(v >= 0 for v in boot.values()), boot
        parts = boot["interpreter_s"] + boot["torch_import_s"] + boot["harness_import_s"]
        assert abs(parts - boot["boot_s"]) < 0.01, boot
        assert (boot["torch_import_s"] == 0) if forked_here else (boot["torch_import_s"] > 0), boot


@pytest.mark.slow
def test_a_package_on_the_bots_pythonpath_imports_in_the_sandboxed_worker(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A library installed on PYTHONPATH imported in the bot and not in the workers (ModuleNotFoundError):
    the bot's PYTHONPATH folders are shown to workers read-only, as the Python installation's packages are."""
    from kforge_bot.evaluate import isolation
    from kforge_bot.kernelspec import load_manifest

    if not isolation.probe().available:
        pytest.skip(f"no sandbox on this machine: {isolation.probe().describe()}")
    site = tmp_path / "site"
    (site / "extlib").mkdir(parents=True)
    (site / "extlib" / "__init__.py").write_text("def triple(x):\n    return x * 3\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "kernel.py").write_text("import torch\nfrom extlib import triple\n\n\ndef kernel(x):\n    return triple(x)\n\n\n"
                                    "def make_inputs():\n    return [torch.randn(16)]\n")
    (repo / "kforge.yaml").write_text("kernels:\n  k: {file: kernel.py, entry: kernel, inputs: make_inputs}\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    spec = load_manifest(repo / "kforge.yaml")["k"]
    result = evaluate(spec, spec.baseline, "cpu", EvalSettings(seeds=1, measure=False, profile=False,
                                                                isolation="required"))
    assert result.verdict == "pass", result.reason


def test_a_scratch_folder_that_cannot_be_removed_is_an_error_naming_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from kforge_bot.errors import KforgeError
    from kforge_bot.evaluate.scratch import remove_scratch

    scratch = tmp_path / "kforge-eval-x"
    (scratch / "deep" / "er").mkdir(parents=True)
    (scratch / "deep" / "er").chmod(0)
    (scratch / "deep").chmod(0)

    def refuse(path: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    with pytest.raises(KforgeError, match="cannot remove a worker's scratch folder") as caught:
        remove_scratch(scratch)
    assert str(scratch) in str(caught.value)
    monkeypatch.undo()
    remove_scratch(scratch)  # permissions given back, then removed
    assert not scratch.exists()


def test_a_scratch_nested_past_path_max_with_locked_folders_is_removed(tmp_path: Path) -> None:
    # Red-team pass: a candidate that nests folders a few thousand deep (one `chdir` at a time, past PATH_MAX) and
    # locks one there made the removal raise RecursionError (not the one-line error), the scratch left behind.
    from kforge_bot.evaluate.scratch import remove_scratch

    scratch = tmp_path / "kforge-eval-deep"
    scratch.mkdir()
    here = os.getcwd()
    try:
        os.chdir(scratch)
        for level in range(3000):
            os.mkdir("d")
            os.chdir("d")
            if level == 2500:
                os.mkdir("locked")
                os.mkdir("locked/x")
                os.chmod("locked", 0)
    finally:
        os.chdir(here)
    remove_scratch(scratch)
    assert not os.path.lexists(scratch)
