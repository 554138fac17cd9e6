"""One adversarial candidate per reward-hack class, each through the full evaluate() on the CPU.

Every candidate in tests/data/adversarial/ claims to compute problem.py's row softmax. Each test asserts
the verdict and that the reason names the problem. Two layers are exercised separately: the default
evaluation (static scan, then the sandboxed worker), and the worker's runtime checks alone, with the
static scan switched off in this (the parent's) process, for the hacks the scan would stop first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.verdict_cases import SEEDS, Case, assert_verdict, judge_all, judging_settings

import kforge_bot.evaluate.api as api
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.references import ReferenceStore
from kforge_bot.evaluate.static_scan import static_findings
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
CHECK, PROFILED, TIMED = judging_settings(timeout_s=60)
HANG = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=6)
FAKE_SECRETS = {"GITHUB_TOKEN": "ghp_fakefakefake", "OPENAI_API_KEY": "sk-fakefakefake", "HF_TOKEN": "hf_fake"}

# name -> (settings, verdict, regex the reason must match)
DEFAULT_LAYER: dict[str, Case] = {
    # 1. output never written
    "empty_output": (CHECK, "incorrect", r"^shape set 0 seed 11: output 0: "),
    # 2. inputs mutated in place
    "mutate_inputs": (CHECK, "rejected", r"input 0 was modified in place"),
    # outputs aliasing an input
    "alias_input": (CHECK, "rejected", r"output 0 shares memory with input 0"),
    # 5. results cached by pointer and shape
    "cache_pointer": (CHECK, "rejected", r"called again with seed 22's values in the same buffers: output 0: .*"
                                         r"\(result cached across calls\?\)"),
    # 5. ... switched on only after the correctness calls (only the timed phase can expose it): each timed sample's
    # fresh input storage makes the cache miss in some calls and hit in others, or the changed elements expose it
    "cache_delayed": (TIMED, "rejected", r"(input set 0 with elements changed: output 0: .*"
                                         r"\(result cached by input buffer or values\?\)|timed run, shape set 0: "
                                         r"input set \d, output 0: a timed call's result differs from an earlier "
                                         r"timed call's on the same inputs)"),
    # 5. ... keyed by a sample of the input's values (the timed sets repeat; a changed element exposes it)
    "cache_values": (TIMED, "rejected", r"after timing, shape set 0: input set 0 with elements changed: "
                                        r"output 0: .*\(result cached by input buffer or values\?\)"),
    # 3. work escaping the timed region: on a CPU, a thread that finishes the output after the call returned
    # (caught in the timed run, or, on a loaded machine where the thread won the race there, in a later call)
    "background_thread": (TIMED, "rejected", r"^timed run[,:].*the candidate left 1 thread\(s\) running after the "
                                             r"call returned \(Thread-\d+ \(_work\)\); work finishing after a call"),
    # code left to run inside the baseline's calls: a global module hook, a torch function mode never exited
    # (on the dev VM each turned an honest 0.545x into a pass, at 1.41x and 1.15x)
    "global_hook": (CHECK, "rejected", r"the candidate left torch\.nn\.modules\.module\._global_forward_hooks \(1\) "
                                       r"installed \(while importing\); .*inside the baseline's too"),
    "function_mode": (CHECK, "rejected", r"the candidate left a torch function mode \(1 on the stack\) installed "
                                         r"\(while importing\)"),
    # output buffer reused across calls
    "reuse_output": (CHECK, "rejected", r"output 0 of an earlier call changed .*output buffers reused across calls"),
    # 7. tensor subclass / lazy output
    "subclass_output": (CHECK, "rejected", r"output 0 is a .*Deferred, not a plain torch\.Tensor"),
    # 6. monkey-patched timer, comparison, baseline
    "patch_timer": (CHECK, "rejected", r"^static check: line 8: assignment to time\.perf_counter "),
    "patch_compare": (CHECK, "rejected", r"^static check: line 6: assignment to torch\.allclose "),
    "patch_baseline": (CHECK, "rejected", r"^static check: line 19: call to setattr\(\)"),
    # 10. the garbage collector; frames
    "gc_objects": (CHECK, "rejected", r"^static check: line 3: import gc "),
    "getframe": (CHECK, "rejected", r"^static check: line 11: call to sys\._getframe\(\)"),
    # 11. forged result channel, early exit, atexit
    "forge_channel": (CHECK, "rejected", r"^static check: line 18: call to os\.write\(\) .*result channel"),
    "early_exit": (CHECK, "rejected", r"^static check: line 11: call to sys\.exit\(\)"),
    "atexit_forge": (CHECK, "rejected", r"^static check: line 3: import atexit "),
    # 4. framework fallback; inheriting the reference
    "fallback": (PROFILED, "rejected", r"calls every framework op the reference uses \(aten::_softmax, aten::softmax\)"
                                    r".*falls back to the framework"),
    "inherit": (CHECK, "rejected", r"inherits the baseline's forward unchanged"),
    # 9. zeros
    "zeros": (CHECK, "incorrect", r"output 0: \d+ of 16384 elements outside atol=0\.0001, rtol=0\.0001 "
                                  r"\(worst: got 0, expected"),
    # hang, segfault, compile error, runtime error
    "hang": (HANG, "timeout", r"timed out after 6 s"),
    "segfault": (CHECK, "crash", r"killed by SIGSEGV"),
    "syntax_error": (CHECK, "compile_error", r"SyntaxError: expected ':' \(syntax_error\.py, line 8\)"),
    "runtime_error": (CHECK, "crash", r"running shape set 0 seed 11: RuntimeError: mat1 and mat2 shapes cannot be"),
    # secrets: the candidate raises if it sees any; it passes only because it saw none
    "env_token": (CHECK, "pass", r"^correct on every case$"),
    # the same hacks written to slip past the static scan
    "evasive_exit": (CHECK, "rejected", r"exited before the harness finished \(early exit\)$"),
    "evasive_forge": (CHECK, "rejected", r"\(early exit\) after writing 1 unsigned line\(s\) to the result channel"),
    "evasive_reference_files": (CHECK, "incorrect", r"^shape set 0 seed 11: output 0: "),
    "evasive_tensor_method": (CHECK, "rejected", r"replaced torch\.Tensor\.fill_ \(running shape set 0 seed 11\)"),
    # the module the harness writes output files with, planted for its first save: calls that do no work
    "evasive_output_writer": (CHECK, "incorrect", r"^shape set 0 seed 11: output 0: .*\(worst: got 0, expected"),
    # the output files the harness saved, in the worker's own scratch: timed calls that did no work, their
    # outputs rewritten with the right answer after timing, or deleted (missing timed outputs were skipped)
    # Caught by the check of every timed call where the first timed call on a set still worked; which it is depends
    # on how many warm-up calls the host fits in the warm-up time: where every timed call already skipped the work,
    # the timed outputs agree with each other and the rewritten file is what shows (as in evasive_delete_outputs).
    "evasive_output_files": (TIMED, "rejected", r"^timed run, shape set 0(: input set \d, output 0: a timed call's "
                                                r"result differs from an earlier timed call's|, input set \d: the "
                                                r"output file was changed after the harness saved it)"),
    # Its timed calls stop working once a buffer has been seen twice: caught by the check of every timed call
    # against the first on its inputs, or, where no timed call worked, by the missing file.
    "evasive_delete_outputs": (TIMED, "rejected", r"^timed run, shape set 0(: input set \d, output 0: a timed call's "
                                                  r"result differs from an earlier timed call's|, input set \d: the "
                                                  r"output the harness saved is gone)"),
    # work deferred past the timed region into code the harness runs on the output afterwards: a list whose
    # iteration computes it, methods set on the output tensor itself (clone, detach, fill_), and a thread whose
    # is_alive() waits for the work and then says it is not running
    "evasive_lazy_outputs": (TIMED, "incorrect", r"^shape set 0 seed 11: returned no outputs"),
    "evasive_tensor_attributes": (TIMED, "rejected", r"^shape set 0 seed 11: output 0 has attributes of its own "
                                                     r"\(clone, detach, fill_\)"),
    "evasive_thread_alive": (TIMED, "rejected", r"^running shape set 0 seed 11: the candidate left 1 thread\(s\) "
                                                r"running after the call returned"),
    "evasive_threads": (CHECK, "pass", r"^correct on every case$"),
    "evasive_gc": (CHECK, "rejected", r"^static check: line 7: __import__\(\) of a computed module name"),
    "evasive_timer_toggle": (CHECK, "rejected", r"^static check: line 8: __import__\(\) of a computed module name"),
    "evasive_equal_restoring": (CHECK, "rejected", r"^static check: line 13: call to setattr\(\)"),
    "evasive_frames": (CHECK, "rejected", r"^running shape set 0 seed 11: the candidate reached for \.tb_frame "
                                          r"\(candidate line 17\); frames and the garbage collector"),
    # 6. ... keeping the objects and swapping their code: the baseline's forward, the harness's timer
    "code_swap_baseline": (CHECK, "rejected", r"replaced baseline\.forward \(its code, defaults or closure\) "
                                              r"\(while importing\)"),
    "code_swap_timer": (TIMED, "pass", r"^correct on every case; "),  # found no harness: timed honestly (below)
    # control: ordinary library features that use frames internally are not hacks
    "honest_fancy": (CHECK, "pass", r"^correct on every case$"),
}

# With the static scan off: what the worker's own checks make of the hacks the scan stops first.
RUNTIME_LAYER: dict[str, Case] = {
    "patch_timer": (CHECK, "rejected", r"replaced time\.perf_counter, time\.perf_counter_ns \(while importing\)"),
    "patch_compare": (CHECK, "rejected", r"replaced torch\.allclose, torch\.equal \(while importing\)"),
    "patch_baseline": (CHECK, "rejected", r"replaced baseline\.forward \(while importing\)"),
    "evasive_timer_toggle": (CHECK, "rejected", r"replaced time\.perf_counter_ns \(running shape set 0 seed 11\)"),
    "evasive_equal_restoring": (CHECK, "rejected", r"replaced torch\.equal \(running shape set 0 seed 11\)"),
    "gc_objects": (CHECK, "rejected", r"reached for gc\.get_objects\(\) \(candidate line 11\)"),
    "evasive_gc": (CHECK, "rejected", r"reached for gc\.get_objects\(\) \(candidate line 13\)"),
    "getframe": (CHECK, "rejected", r"reached for sys\._getframe\(\) \(candidate line 11\)"),
    "forge_channel": (CHECK, "rejected", r"\(early exit\) after writing \d+ unsigned line\(s\) to the result channel"),
    "early_exit": (CHECK, "rejected", r"exited before the harness finished \(early exit\)$"),
    "atexit_forge": (CHECK, "incorrect", r"^shape set 0 seed 11: output 0: "),
    # inputs rebuilt from the generator's seed and the seed formula: secret seeds leave nothing to rebuild
    "predict_inputs": (TIMED, "pass", r"^correct on every case; "),
}


def _candidate(name: str) -> Implementation:
    return Implementation.from_file(ADV / f"{name}.py", "ModelNew")


def _run_all(cases: dict[str, Case], store: ReferenceStore) -> dict[str, EvalResult]:
    return judge_all(load_spec(ADV / "problem.py"), cases, _candidate, store, first=("hang",))


@pytest.fixture(scope="module")
def store() -> ReferenceStore:
    references = ReferenceStore()
    yield references
    references.cleanup()


@pytest.fixture(scope="module")
def default_layer(store: ReferenceStore) -> dict[str, EvalResult]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in FAKE_SECRETS.items():
            mp.setenv(key, value)
        return _run_all(DEFAULT_LAYER, store)


@pytest.fixture(scope="module")
def runtime_layer(store: ReferenceStore) -> dict[str, EvalResult]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "static_findings", lambda source: [])
        return _run_all(RUNTIME_LAYER, store)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DEFAULT_LAYER))
def test_hack_is_caught(name: str, default_layer: dict[str, EvalResult]) -> None:
    _, verdict, pattern = DEFAULT_LAYER[name]
    assert_verdict(default_layer[name], verdict, pattern)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNTIME_LAYER))
def test_hack_is_caught_without_the_static_scan(name: str, runtime_layer: dict[str, EvalResult]) -> None:
    _, verdict, pattern = RUNTIME_LAYER[name]
    assert_verdict(runtime_layer[name], verdict, pattern)


def test_every_candidate_file_is_exercised() -> None:
    files = {p.stem for p in ADV.glob("*.py")} - {"problem", "honest"}
    assert files == set(DEFAULT_LAYER) | {"predict_inputs"}  # that one reaches the harness by name: runtime only


def test_the_evasive_candidates_really_evade_what_they_claim_to() -> None:
    # These get past the static scan; only the worker's runtime checks stand between them and a pass.
    for name in ("evasive_exit", "evasive_forge", "evasive_reference_files", "evasive_tensor_method",
                 "evasive_threads", "evasive_frames", "evasive_output_writer", "evasive_output_files",
                 "evasive_delete_outputs", "evasive_lazy_outputs", "evasive_tensor_attributes",
                 "evasive_thread_alive", "cache_delayed", "background_thread",
                 "inherit", "fallback", "alias_input", "mutate_inputs", "honest_fancy", "global_hook",
                 "function_mode"):
        assert static_findings((ADV / f"{name}.py").read_text()) == [], name


@pytest.mark.slow
def test_secrets_were_set_in_the_parent_and_invisible_to_the_candidate(default_layer: dict[str, EvalResult]) -> None:
    result = default_layer["env_token"]
    assert result.verdict == "pass"
    assert "credentials visible" not in result.details.get("log_tail", "")
    for value in FAKE_SECRETS.values():
        assert value not in result.details.get("log_tail", "")


@pytest.mark.slow
def test_framework_state_left_behind_is_restored_and_reported(default_layer: dict[str, EvalResult]) -> None:
    # evasive_threads leaves the process single-threaded after each call, to slow the baseline timed next
    restored = default_layer["evasive_threads"].details.get("restored_state", [])
    threads = os.cpu_count() or 1
    if threads == 1:
        pytest.skip("one CPU: torch runs one thread anyway, so there is nothing to restore")
    assert any(r.startswith("torch.get_num_threads(): 1 -> ") for r in restored), restored


@pytest.mark.slow
def test_an_exit_handler_never_runs(runtime_layer: dict[str, EvalResult]) -> None:
    # atexit_forge registers a handler printing a fake passing result; the worker leaves with os._exit
    assert '"speedup": 100.0' not in runtime_layer["atexit_forge"].details["log_tail"]


@pytest.mark.slow
def test_forged_lines_are_counted_not_believed(runtime_layer: dict[str, EvalResult],
                                               default_layer: dict[str, EvalResult]) -> None:
    assert runtime_layer["forge_channel"].details["forged_lines"] >= 1
    assert default_layer["evasive_forge"].details["forged_lines"] == 1
    assert default_layer["evasive_forge"].device_name != "forged"


@pytest.mark.slow
def test_reference_outputs_are_not_left_on_disk(store: ReferenceStore, default_layer: dict[str, EvalResult]) -> None:
    assert list(store.root.rglob("*.out")) == []


@pytest.mark.slow
def test_the_bot_is_unaffected_after_crashes_and_hangs(default_layer: dict[str, EvalResult],
                                                       runtime_layer: dict[str, EvalResult],
                                                       store: ReferenceStore) -> None:
    assert default_layer["hang"].verdict == "timeout" and default_layer["segfault"].verdict == "crash"
    spec = load_spec(ADV / "problem.py")
    result = evaluate(spec, _candidate("honest"), "cpu", CHECK, seeds=SEEDS, references=store)
    assert result.verdict == "pass", result.reason
    assert result.correctness["cases_checked"] == 3 + 2  # two seeds, the same-buffers call, two held-out variants
    # and no worker process is left behind
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            assert b"kforge_bot.evaluate.worker.entry" not in cmdline, f"worker {stat.parent.name} still running"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["code_swap_timer", "predict_inputs"])
def test_attacks_that_would_look_fast_find_nothing_and_are_timed_honestly(
        name: str, default_layer: dict[str, EvalResult], runtime_layer: dict[str, EvalResult]) -> None:
    result = default_layer[name] if name in default_layer else runtime_layer[name]
    # Five honest softmaxes per call: slower than the baseline's one, which is all the attack could hide.
    assert result.speedup is not None and result.speedup < 1.0, result.reason
