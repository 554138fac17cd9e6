"""evaluate(): verdicts, paired timing and the report, on real CPU workers."""

from __future__ import annotations

import json
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import kforge_bot.evaluate.api as api
import kforge_bot.evaluate.references as references
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.api import evaluate, new_seeds
from kforge_bot.evaluate.references import ReferenceStore
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.evaluate.sandbox import WorkerProcess
from kforge_bot.gate.base_spec import judged_spec
from kforge_bot.kernelspec import Implementation, KernelSpec, kernel_implementation, load_manifest, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"

MANIFEST_REPO = Path(__file__).parents[1] / "data" / "manifest_repo"

# The reference does its work eight times over; the candidate once, by another route (log_softmax + exp),
# so it is genuinely faster on any CPU and calls none of the reference's ops.
REDUNDANT = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            y = torch.softmax(x, dim=1)
            for _ in range(7):  # the same result again and again
                y = torch.softmax(x, dim=1)
            return y


    def get_inputs():
        return [torch.randn(256, 1024)]


    def get_init_inputs():
        return []
''')
FASTER = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def forward(self, x):
            return torch.log_softmax(x, dim=1).exp()
''')
TWO_OUTPUTS = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return x.sum(dim=1) * self.scale, torch.argmax(x, dim=1)


    def get_inputs():
        return [torch.randn(16, 32)]


    def get_init_inputs():
        return [2.0]
''')


@pytest.fixture
def single_threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers with one torch thread: on a shared 2-core CI machine, OpenMP threads that wait on each other
    while the machine is oversubscribed turn a 3 ms kernel into 150 ms samples. The harness's statistics
    are what these tests check, not multi-threaded speed."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def _kb(tmp_path: Path, source: str, name: str = "problem.py") -> KernelSpec:
    path = tmp_path / name
    path.write_text(source)
    return load_spec(path)


def _cand(source: str, filename: str = "cand.py") -> Implementation:
    return Implementation(textwrap.dedent(source), "ModelNew", filename)


@pytest.mark.slow
def test_a_genuinely_faster_candidate_passes_with_a_speedup_interval_above_one(tmp_path: Path,
                                                                              single_threaded: None) -> None:
    spec = _kb(tmp_path, REDUNDANT)
    result = evaluate(spec, _cand(FASTER), "cpu", EvalSettings(seeds=2, timing_budget_s=0.5))
    assert result.verdict == "pass", result.reason
    assert result.faster and result.speedup_ci is not None
    low, high = result.speedup_ci
    # The verdict, not a measured ratio: on the shared 2-core VM the interval of this ~1.8x candidate has reached
    # down to 1.39 (2026-12-02, idle), so only "faster" (the interval above 1.0) is asserted.
    assert 1.0 < low <= result.speedup <= high, (result.speedup, result.speedup_ci)
    assert result.baseline is not None and result.candidate is not None
    assert result.candidate.median_ms < result.baseline.median_ms
    assert result.baseline.samples == result.candidate.samples >= 10
    assert result.reason.startswith(f"correct on every case; {result.speedup:.3f}x")
    timing = result.details["timing"]
    assert len(timing) == 1 and timing[0]["pairs"] == result.baseline.samples and timing[0]["stop_reason"]
    corr = result.correctness
    assert corr["ok"] and corr["timed_outputs_checked"] == 3  # every rotated input set's timed output
    assert {r["case"] for r in corr["records"]} >= {"after timing, shape set 0: input set 1's values in input "
                                                     "set 0's buffers"}
    assert result.profile["reference"]["compute_ops"] == ["aten::_softmax", "aten::softmax"]
    assert "aten::_log_softmax" in result.profile["candidate"]["compute_ops"]
    assert result.device_name and result.target_info["kind"] == "cpu"


@pytest.mark.slow
def test_a_against_a_has_an_interval_containing_one(tmp_path: Path, single_threaded: None) -> None:
    spec = _kb(tmp_path, REDUNDANT)
    # The same code on both sides. A 99.9% interval: this is a test, it must not fail 5% of the time. 1.5 s of
    # pairs: with 0.5 s, another benchmark's bursts beside it on the 2-core CI machine once tilted a handful of
    # pairs to 0.72-0.99 (two busy loops never did).
    # A second evaluation where the first's interval misses 1.0: a bias of the harness shows in both, while a burst
    # of the shared VM's noise (2026-12-02: 1 run in 5 missed, idle, at this code and at the session's first)
    # rarely spans two runs.
    intervals = []
    for _ in range(2):
        result = evaluate(spec, spec.baseline, "cpu", EvalSettings(seeds=2, timing_budget_s=1.5, confidence=0.999))
        assert result.verdict == "pass", result.reason  # not 'framework fallback': it is an A/A run
        assert 0.8 < result.speedup < 1.25, (result.speedup, result.speedup_ci)
        low, high = result.speedup_ci
        intervals.append((low, high))
        if low <= 1.0 <= high:
            break
    else:
        pytest.fail(f"two A/A runs both missed 1.0: {intervals}")
    assert not result.faster


RELU_REFERENCE = """\
import torch


def reference(x, y):
    return torch.relu(x * 2.0 + y)


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
"""


def _relu_checkout(folder: Path) -> KernelSpec:
    folder.mkdir()
    (folder / "ref.py").write_text(RELU_REFERENCE)
    (folder / "k.py").write_text("import torch\n\n\ndef kernel(x, y):\n    return torch.relu(x * 2.0 + y)\n")
    (folder / "kforge.yaml").write_text("version: 1\nkernels:\n  k:\n    file: k.py\n    entry: kernel\n"
                                        "    reference: ref.py:reference\n    inputs: ref.py:make_inputs\n"
                                        "    shapes: [{n: 512}]\n    targets: [cpu]\n")
    return load_spec(folder / "kforge.yaml", "k")


@pytest.mark.slow
@pytest.mark.parametrize("one_worker", [True, False], ids=["one worker", "split"])
def test_a_against_a_from_two_checkouts_has_an_interval_containing_one(tmp_path: Path, one_worker: bool) -> None:
    """Issue 40: the same ~0.1 ms kernel from a base and a head checkout, as the gate times them
    (benchmarks/aa_layouts.py), read +3% to +13% with every interval above 1.0 in the one-worker layout. The
    verdict, not a ratio: busy cores widen the interval, a bias of the harness moves it off 1.0. The conditions'
    rules are off (1.0): on the shared machine they would call the timing disturbed, and the interval is what this
    test is about."""
    base, head = _relu_checkout(tmp_path / "base"), _relu_checkout(tmp_path / "head")
    settings = EvalSettings(seeds=1, timing_budget_s=1.5, confidence=0.999, profile=False, cpu_threads=1,
                            allow_framework_fallback=True, max_preempted_share=1.0, max_preempted_gap=1.0,
                            max_crowded_share=1.0, max_wait_share=1.0)
    intervals = []
    for _ in range(2):  # a second run where the first misses: a bias shows in both, a burst of load rarely does
        result = evaluate(judged_spec(head, base), kernel_implementation(head), "cpu", settings,
                          baseline=kernel_implementation(base), one_worker=one_worker)
        assert result.verdict == "pass", result.reason
        assert result.speedup_ci is not None, result.reason
        low, high = result.speedup_ci
        intervals.append((round(low, 4), round(high, 4)))
        if low <= 1.0 <= high:
            break
    else:
        pytest.fail(f"two A/A runs both missed 1.0: {intervals}")
    assert not result.faster


@pytest.mark.slow
def test_manifest_kernel_against_its_reference_on_every_shape_set(single_threaded: None) -> None:
    spec = load_manifest(MANIFEST_REPO / "kforge.yaml")["rmsnorm"]
    result = evaluate(spec, spec.baseline, "cpu", EvalSettings(timing_budget_s=0.4, profile=False),
                      baseline=spec.reference)
    assert result.verdict == "pass", result.reason
    corr = result.correctness
    assert len(corr["seeds"]) == 2  # the manifest's `seeds: 2`
    assert corr["shape_sets"] == [{"rows": 64, "cols": 128}, {"rows": 16, "cols": 512}]
    assert {r["shape_set"] for r in corr["records"]} == {0, 1}
    # per shape set: 2 seeds + same-buffers call, 3 timed outputs, 3 changed-element calls, 3 moved-buffer calls;
    # and the two held-out variants (evaluate.wire.heldout)
    assert corr["cases_checked"] == 24 + 2 and corr["timed_outputs_checked"] == 6
    assert len(corr["heldout"]) == 2 and not any(v.get("skipped") for v in corr["heldout"])
    assert corr["tolerance"] == {"atol": 1e-5, "rtol": 1e-5}
    assert all(o["atol"] == 1e-5 for r in corr["records"] for o in r["outputs"])
    # Compared, not identical; and close everywhere. Not `max_abs_error < atol`: the elementwise bound is
    # atol + rtol * |expected|, so an output of a few units may differ by more than atol and pass (CI's run of the
    # twentieth session, on its seeds: 1.53e-05).
    assert corr["max_abs_error"] > 0 and corr["max_rel_norm_error"] < 1e-5
    assert [t["shape_set"] for t in result.details["timing"]] == [0, 1]
    per_shape = sum(t["baseline"]["median_ms"] for t in result.details["timing"])
    assert result.baseline.median_ms == pytest.approx(per_shape)  # one call on every shape set
    again = EvalResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.to_dict() == json.loads(json.dumps(result.to_dict()))
    assert again.speedup_ci == result.speedup_ci and again.correct


def _quick(spec: KernelSpec, candidate: Implementation, **kwargs: Any) -> EvalResult:
    return evaluate(spec, candidate, "cpu", EvalSettings(seeds=2, measure=False, profile=False), seeds=[3, 4],
                    **kwargs)


@pytest.mark.slow
def test_correctness_verdicts_on_manifest_and_multi_output_kernels(tmp_path: Path) -> None:
    kernels = load_manifest(MANIFEST_REPO / "kforge.yaml")
    rms, scale = kernels["rmsnorm"], kernels["scale"]
    two = _kb(tmp_path, TWO_OUTPUTS)
    jobs = {
        "rms_no_weight": (rms, rms.candidate_from_source(
            "import torch\ndef rmsnorm(x, w):\n    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)\n")),
        "rms_wrong_name": (rms, rms.candidate_from_source("def rms_norm(x, w):\n    return x\n")),
        "scale_aa": (scale, scale.baseline),
        "scale_wrong": (scale, scale.candidate_from_source(
            "import torch.nn as nn\nclass Scale(nn.Module):\n    def __init__(self, factor):\n"
            "        super().__init__()\n        self.factor = factor\n"
            "    def forward(self, x):\n        return x * (self.factor + 1e-3)\n")),
        "scale_bad_init": (scale, scale.candidate_from_source(
            "import torch.nn as nn\nclass Scale(nn.Module):\n    def forward(self, x):\n        return x * 3\n")),
        "two_ok": (two, _cand('''
            import torch
            import torch.nn as nn
            class ModelNew(nn.Module):
                def __init__(self, scale):
                    super().__init__()
                    self.scale = scale
                def forward(self, x):
                    return [torch.einsum("ij->i", x) * self.scale, x.max(dim=1).indices]
        ''')),
        "two_wrong_second": (two, _cand('''
            import torch
            import torch.nn as nn
            class ModelNew(nn.Module):
                def __init__(self, scale):
                    super().__init__()
                    self.scale = scale
                def forward(self, x):
                    return torch.einsum("ij->i", x) * self.scale, x.min(dim=1).indices
        ''')),
        "two_missing_output": (two, _cand('''
            import torch
            import torch.nn as nn
            class ModelNew(nn.Module):
                def __init__(self, scale):
                    super().__init__()
                def forward(self, x):
                    return torch.einsum("ij->i", x) * 2.0
        ''')),
    }
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(_quick, spec, cand) for name, (spec, cand) in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}

    def verdict(name: str) -> tuple[str, str]:
        return results[name].verdict, results[name].reason

    v, reason = verdict("rms_no_weight")
    assert v == "incorrect" and reason.startswith("shape set 0 {'rows': 64, 'cols': 128} seed 3: output 0:"), reason
    v, reason = verdict("rms_wrong_name")
    assert v == "compile_error" and "defines no 'rmsnorm'" in reason
    assert verdict("scale_aa")[0] == "pass"
    v, reason = verdict("scale_wrong")
    assert v == "incorrect" and "output 0:" in reason and "elements outside" in reason
    v, reason = verdict("scale_bad_init")
    assert v == "compile_error" and "TypeError" in reason and "factor" in reason
    assert verdict("two_ok")[0] == "pass", verdict("two_ok")
    v, reason = verdict("two_wrong_second")
    assert v == "incorrect" and "output 1: " in reason and "integer elements differ" in reason
    v, reason = verdict("two_missing_output")
    assert v == "incorrect" and "1 outputs, expected 2" in reason


@pytest.mark.slow
def test_too_few_pairs_give_no_interval_rather_than_a_false_one(tmp_path: Path, single_threaded: None) -> None:
    spec = _kb(tmp_path, REDUNDANT)
    settings = EvalSettings(seeds=2, timing_budget_s=0.2, min_pairs=1, max_pairs=3, profile=False)
    result = evaluate(spec, _cand(FASTER), "cpu", settings)
    assert result.verdict == "pass" and result.speedup is not None
    assert result.speedup_ci is None and not result.faster  # three pairs (or fewer) cannot establish anything
    pairs = result.details["timing"][0]["pairs"]
    assert 1 <= pairs <= 3
    assert result.details["speedup_ci_note"].startswith(f"too few pairs ({pairs}) for a 95.0% confidence interval")
    assert f"too few pairs ({pairs})" in result.reason
    assert result.details["timing"][0]["speedup_ci"] is None
    json.dumps(result.to_dict(), allow_nan=False)  # no Infinity in the report


@pytest.mark.slow
def test_a_broken_reference_is_a_configuration_error_naming_the_kernel(tmp_path: Path) -> None:
    spec = _kb(tmp_path, REDUNDANT.replace("return [torch.randn(256, 1024)]", "raise ValueError('no inputs today')"))
    with pytest.raises(KforgeError) as info:
        _quick(spec, _cand(FASTER))
    text = str(info.value)
    assert str(tmp_path / "problem.py") in text and "the reference for kernel 'problem' failed on cpu" in text
    assert "no inputs today" in text and "\n" not in text


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["off", "required"])
def test_references_are_computed_once_per_store_and_never_left_on_disk(tmp_path: Path, isolation: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from kforge_bot.evaluate import isolation as sandboxing

    if isolation == "required" and not sandboxing.probe().available:
        pytest.skip(f"no sandbox here: {sandboxing.probe().problem}")
    events: list[str] = []
    store = ReferenceStore()
    real_init, real_send, real_run = WorkerProcess.__init__, WorkerProcess.send, WorkerProcess.run

    def starting(self: WorkerProcess, workdir: Any, role: str, *args: Any, **kwargs: Any) -> None:
        events.append(f"start {role}")
        real_init(self, workdir, role, *args, **kwargs)

    def sending(self: WorkerProcess, request: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        # Unsandboxed, a candidate's worker gets its request only when no reference output is on disk.
        on_disk = list(store.root.rglob("ref_*")) if request["role"] == "candidate" else []
        events.append(f"send {request['role']}" + (" with references on disk" if on_disk else ""))
        return real_send(self, request, *args, **kwargs)

    def running(self: WorkerProcess, request: dict[str, Any] | None, *args: Any, **kwargs: Any) -> Any:
        events.append("run" if request is None else f"run {request['role']}")
        return real_run(self, request, *args, **kwargs)

    monkeypatch.setattr(WorkerProcess, "__init__", starting)
    monkeypatch.setattr(WorkerProcess, "send", sending)
    monkeypatch.setattr(WorkerProcess, "run", running)
    spec = _kb(tmp_path, REDUNDANT)
    settings = EvalSettings(seeds=2, measure=False, profile=False, isolation=isolation)
    try:
        first = evaluate(spec, _cand(FASTER), "cpu", settings, seeds=[3, 4], references=store)
        second = evaluate(spec, spec.baseline, "cpu", settings, seeds=[3, 4], references=store)
        assert first.verdict == second.verdict == "pass", (first.reason, second.reason)
        # The candidate's worker warms up while the reference runs; the second evaluation reuses the reference.
        # Sandboxed, where it cannot see the reference's files, it also imports and builds meanwhile.
        if isolation == "off":
            assert events == ["start candidate", "start reference", "run reference", "send reference",
                              "send candidate", "run", "start candidate", "send candidate", "run"]
        else:
            assert events == ["start candidate", "send candidate", "start reference", "run reference",
                              "send reference", "run", "start candidate", "send candidate", "run"]
        assert list(store.root.rglob("*")) == []  # the reference worker's folder went with its files
    finally:
        store.cleanup()
    assert not store.root.exists()


def test_targets_and_seeds() -> None:
    spec = load_spec(Path(__file__).parents[1] / "data" / "kb" / "softmax.py")
    from kforge_bot.targets import choose_target

    assert choose_target("cpu").device_kind(spec.targets) == "cpu"
    if not __import__("torch").cuda.is_available():
        assert choose_target("auto").device_kind(spec.targets) == "cpu"
        with pytest.raises(KforgeError) as info:
            evaluate(spec, spec.baseline, "cuda")
        assert "target 'cuda' is not available on this machine" in str(info.value)
    with pytest.raises(KforgeError):
        choose_target("tpu")
    cpu_less = load_manifest(MANIFEST_REPO / "kforge.yaml")["scale"]
    assert "cpu" in cpu_less.targets
    a, b = new_seeds(3), new_seeds(3)
    assert len(a) == 3 and a != b and all(0 <= s < 2**63 for s in a)


@pytest.mark.slow
def test_a_named_gpu_target_taken_at_its_word_is_refused_by_the_worker_in_plain_words(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With NVIDIA's device nodes present the bot does not import torch to check `--target cuda` (seconds on
    the critical path); where torch cannot use the device after all, the worker says so, naming no culprit."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    import kforge_bot.targets as targets

    monkeypatch.setattr(targets, "_device_nodes_present", lambda kind: True)
    spec = load_spec(Path(__file__).parents[1] / "data" / "kb" / "softmax.py")
    with pytest.raises(KforgeError) as info:
        evaluate(spec, spec.baseline, "cuda", EvalSettings(seeds=1, measure=False, profile=False))
    assert "target 'cuda' is not available on this machine: torch here has no CUDA support (a CPU build)" \
        in str(info.value)


def test_the_static_scan_answers_without_starting_any_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_workers(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no worker may start for a statically rejected candidate")

    monkeypatch.setattr(references, "run_worker", no_workers)
    monkeypatch.setattr(api, "start_worker", no_workers)
    spec = load_spec(Path(__file__).parents[1] / "data" / "kb" / "softmax.py")
    result = evaluate(spec, _cand("import gc\nclass ModelNew:\n    pass\n"), "cpu")
    assert result.verdict == "rejected" and result.reason.startswith("static check: line 1: import gc")
    assert result.details["static_findings"] == [result.reason.removeprefix("static check: ")]


COMPILED = textwrap.dedent('''
    import torch
    import torch.nn as nn


    def _softmax(x):
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)


    _compiled = torch.compile(_softmax)


    class ModelNew(nn.Module):
        def forward(self, x):
            return _compiled(x)
''')


@pytest.mark.slow
def test_a_torch_compile_candidate_is_not_mistaken_for_a_hack(tmp_path: Path) -> None:
    # torch.compile patches nn.Module.__init__, starts threads and walks frames, all from torch's own code:
    # none of the guards may take that for the candidate's doing. (~30 s: inductor builds C++ on the CPU.)
    import shutil

    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("torch.compile on the CPU needs a C++ compiler; none here")
    spec = load_spec(Path(__file__).parents[1] / "data" / "adversarial" / "problem.py")
    result = evaluate(spec, _cand(COMPILED), "cpu", EvalSettings(seeds=2, timing_budget_s=0.3, timeout_s=300))
    assert result.verdict == "pass", result.reason


@pytest.mark.slow
def test_a_time_below_the_hardware_floor_is_rejected_and_a_sane_one_passes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor: compulsory bytes over peak bandwidth. On a pretend machine of 1 MB/s every real kernel here
    reads as impossibly fast (rejected, the floor named); at 10 TB/s none is."""
    problem = tmp_path / "big_softmax.py"  # one call well over 0.2 ms: timed one call per sample
    problem.write_text((ADV / "problem.py").read_text().replace("torch.randn(64, 256)", "torch.randn(1024, 2048)"))
    spec = load_spec(problem)
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"kind": "kforge-bot-ceilings", "bandwidth_gbs": 0.001}))
    monkeypatch.setenv("KFORGE_CEILINGS", str(slow))
    settings = EvalSettings(seeds=2, timing_budget_s=0.3, profile=False, timeout_s=60)
    result = evaluate(spec, Implementation.from_file(ADV / "honest.py", "ModelNew"), "cpu", settings)
    assert result.verdict == "rejected", result.reason
    assert "below the hardware's floor" in result.reason and "0.001 GB/s" in result.reason
    assert result.speedup is None
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps({"kind": "kforge-bot-ceilings", "bandwidth_gbs": 10000}))
    monkeypatch.setenv("KFORGE_CEILINGS", str(fast))
    result = evaluate(spec, Implementation.from_file(ADV / "honest.py", "ModelNew"), "cpu", settings)
    assert result.verdict == "pass", result.reason
    assert result.details["timing"][0]["hardware_floor_ms"] > 0


SHARED = Path(__file__).parents[1] / "data" / "shared_weights"


@pytest.mark.slow
def test_weights_both_sides_hold_are_read_from_one_place_and_may_not_be_written() -> None:
    """Where two copies of the same weights sit moves a kernel's time (an A/A LayerNorm read 1.009x with two
    instances): the candidate's equal parameters and buffers point at the baseline's. A candidate that writes
    into them (to change the baseline's work) is rejected, though its own answers are right."""
    spec = load_spec(SHARED / "problem.py")
    settings = EvalSettings(seeds=2, timing_budget_s=0.3, profile=False, timeout_s=60)
    store = ReferenceStore()
    try:
        honest = evaluate(spec, Implementation.from_file(SHARED / "honest.py", "ModelNew"), "cpu", settings,
                          seeds=[5, 6], references=store)
        tamper = evaluate(spec, Implementation.from_file(SHARED / "tamper.py", "ModelNew"), "cpu", settings,
                          seeds=[5, 6], references=store)
    finally:
        store.cleanup()
    assert honest.verdict == "pass", honest.reason
    assert honest.details["shared_with_baseline"] == ["proj.weight", "proj.bias", "scale"]
    assert tamper.verdict == "rejected", tamper.reason
    assert tamper.reason.startswith("after the correctness calls: the candidate changed its 'proj.weight' in place")


@pytest.mark.slow
def test_a_large_problem_for_its_memory_budget_is_cut_down_or_refused_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 MB in and out: the whole plan needs ~320 MB; with 300 MB to spend (KFORGE_MEMORY_BUDGET) the evaluation
    keeps one seed and one timed set and says so; with 150 MB it is refused, naming the sizes, not blaming the
    reference (before: the host ran out of memory and the reference's worker died of SIGKILL)."""
    problem = tmp_path / "big_softmax.py"
    problem.write_text((ADV / "problem.py").read_text().replace("torch.randn(64, 256)", "torch.randn(1024, 2048)"))
    spec = load_spec(problem)
    settings = EvalSettings(seeds=2, timing_budget_s=0.3, profile=False, timeout_s=60)
    honest = Implementation.from_file(ADV / "honest.py", "ModelNew")
    monkeypatch.setenv("KFORGE_MEMORY_BUDGET", "300M")
    result = evaluate(spec, honest, "cpu", settings)
    assert result.verdict == "pass", result.reason
    assert result.details["memory_fit"]["seeds"] == 1 and result.details["memory_fit"]["rotate_sets"] == 1
    assert "cut to 1 seed(s) and 1 timed input set(s) to fit in memory" in result.details["memory_fit"]["note"]
    # one seed, the timed output, the set with elements changed; and the two held-out variants
    assert result.correctness["cases_checked"] == 3 + 2
    monkeypatch.setenv("KFORGE_MEMORY_BUDGET", "150M")
    with pytest.raises(KforgeError) as caught:
        evaluate(spec, honest, "cpu", settings)
    assert "kernel 'big_softmax' does not fit on cpu: inputs of 8.4 MB and outputs of 8.4 MB per set" in str(caught.value)


@pytest.mark.slow
def test_a_crash_says_whose_code_crashed(tmp_path: Path) -> None:
    """The gate charges a crash to the side whose code crashed (issue 28, class 4): the worker says which."""
    from fakes.gate_repos import tiny_spec_in

    spec = tiny_spec_in(tmp_path)
    fine = Implementation("def kernel(x, y):\n    return x * 2.0 + y\n", "kernel", "k.py", spec.root)
    broken = Implementation("def kernel(x, y):\n    raise RuntimeError('CUDA error: fake')\n", "kernel", "k.py",
                            spec.root)
    unbuildable = Implementation("raise ImportError('the base does not build')\n", "kernel", "k.py", spec.root)
    settings = EvalSettings(seeds=1, timing_budget_s=0.3, profile=False)
    cases = {"candidate": (broken, fine), "baseline": (fine, broken), "baseline build": (fine, unbuildable)}
    for expected, (candidate, baseline) in cases.items():
        result = evaluate(spec, candidate, "cpu", settings, baseline=baseline)
        assert result.verdict == "crash", (expected, result.reason)
        assert result.details["failed_side"] == expected.split()[0], (expected, result.reason)
