"""The generator's prompts and reply parser, and a short conversation with the real openai client."""

from __future__ import annotations

import pytest
from fakes.llm_server import ScriptedLLMServer, reply

from kforge_bot.agents import generator as gen
from kforge_bot.agents.llm import Endpoint, LLMClient, RetryPolicy
from kforge_bot.agents.reply_parser import extract_source
from kforge_bot.errors import KforgeError, MalformedReply

H200 = {
    "name": "NVIDIA H200",
    "compute_capability": "9.0",
    "sms": 132,
    "memory_bandwidth_gbs": 4800,
    "measured_copy_gbs": 4200,
    "l2_mb": 60,
    "key_instructions": "wgmma, TMA",
}
CONTRACT = {
    "name": "softmax_triton",
    "language": "triton",
    "entry": "softmax",
    "kernel_file": "triton/softmax.py",
    "shape_sets": [{"rows": 8192, "cols": 4096}, {"rows": 32768, "cols": 8192}],
    "tolerance": {"atol": 0.01, "rtol": 0.01},
    "forbidden": ["torch.softmax", "torch.nn.functional.softmax"],
}
BASELINE = '''import torch
import triton
import triton.language as tl

NUM_WARPS = 2


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    y = tl.exp(x - tl.max(x, 0))
    tl.store(out_ptr + row * n_cols + offs, y / tl.sum(y, 0), mask=offs < n_cols)


def softmax(x):
    out = torch.empty_like(x)
    _softmax_kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=NUM_WARPS)
    return out
'''
COMPILE_ERROR = """Traceback (most recent call last):
  File "softmax.py", line 12, in softmax
triton.compiler.errors.CompilationError: at 6:8:
    x = tl.load(in_ptr + row * n_cols + offs, mask=offs < n_cols)
        ^
ValueError: arange's range must be a power of 2"""
INCORRECT_RESULT = {
    "verdict": "incorrect",
    "reason": "seed 0, shape set 2: output 0: 131072 of 268435456 elements outside atol=0.01, rtol=0.01",
    "correctness": {
        "ok": False,
        "records": [
            {"case": "seed 0, shape set 1", "shape_set": {"rows": 8192, "cols": 4096}, "seed": 0,
             "outputs": [{"index": 0, "shape": [8192, 4096], "dtype": "float16", "atol": 0.01, "rtol": 0.01,
                          "max_abs": 0.0, "max_rel": 0.0, "rel_norm": 0.0, "ok": True}]},
            {"case": "seed 0, shape set 2", "shape_set": {"rows": 32768, "cols": 8192}, "seed": 0,
             "outputs": [{"index": 0, "shape": [32768, 8192], "dtype": "float16", "atol": 0.01, "rtol": 0.01,
                          "max_abs": 0.0625, "max_rel": 0.5, "rel_norm": 0.031, "ok": False,
                          "problem": "131072 of 268435456 elements outside atol=0.01, rtol=0.01 (worst: got 0.0625, expected 0.125)"}]},
        ],
    },
    "speedup": None,
    "speedup_ci": None,
}


GOOD = BASELINE.replace("NUM_WARPS = 2", "NUM_WARPS = 8")


def fenced(code: str, tag: str = "python") -> str:
    return f"```{tag}\n{code}```"


# --- which prompt -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "language,target,expected,title",
    [
        ("triton", "cuda", "triton", "Triton on NVIDIA GPUs"),
        ("triton", "xpu", "triton_xpu", "Triton on Intel GPUs"),
        ("cuda", "cuda", "cuda", "CUDA C++ through PyTorch"),
        ("cpp", "cpu", "cpp", "C/C++ on the CPU"),
        ("c", "cpu", "c", "C/C++ on the CPU"),
        ("sycl", "xpu", "sycl", "SYCL for Intel GPUs"),
        ("torch", "cuda", "triton", "Triton on NVIDIA GPUs"),
        ("torch", "xpu", "triton_xpu", "Triton on Intel GPUs"),
        ("torch", "cpu", "cpp", "C/C++ on the CPU"),
    ],
)
def test_template_per_language_and_target(language, target, expected, title):
    assert gen.kernel_language(language, target) == expected
    system = gen.build_messages(language=language, target_kind=target, hardware={}, contract={"entry": "f"}, current_source="def f(): pass\n")[0]
    assert system["role"] == "system" and title in system["content"]
    assert "$" not in system["content"]  # every placeholder filled


def test_unknown_language_or_target_is_a_user_error():
    with pytest.raises(KforgeError, match="no generator prompt for kernel language 'metal'"):
        gen.kernel_language("metal", "mps")
    with pytest.raises(KforgeError, match="on target 'mps'"):
        gen.kernel_language("torch", "mps")


def test_source_format_from_the_file_name():
    assert gen.source_format("kernels/softmax.py") == "python"
    assert gen.source_format("csrc/stencil.cu") == "cuda"
    assert gen.source_format("src/blur.c") == "c"
    assert gen.source_format("src/gemm.cpp") == "cpp"
    assert gen.source_format(None) == "python"


# --- what the prompt carries -------------------------------------------------------------------------


def user_prompt(**kwargs) -> str:
    args = dict(language="triton", target_kind="cuda", hardware=H200, contract=CONTRACT, current_source=BASELINE)
    args.update(kwargs)
    messages = gen.build_messages(**args)
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_first_prompt_has_hardware_contract_and_source():
    text = user_prompt()
    for fact in ("NVIDIA H200", "sms: 132", "memory_bandwidth_gbs: 4800", "measured_copy_gbs: 4200", "wgmma, TMA"):
        assert fact in text
    assert "entry: `softmax`" in text
    assert '{"rows": 32768, "cols": 8192}' in text
    assert '"atol": 0.01' in text
    assert "`torch.softmax`" in text and "must not call" in text
    assert "```python\n" + BASELINE.rstrip() + "\n```" in text
    assert "the baseline, as written" in text
    assert "Attempts so far" not in text and "recommendations" not in text.lower().split("## now")[0]
    assert "Find the main bottleneck" in text


def test_hardware_facts_may_be_ready_text():
    text = user_prompt(hardware="Device: NVIDIA H200 (kforge-bot target 'cuda', runner 'h200').\n- sm count: 132")
    assert "## Target hardware\nDevice: NVIDIA H200 (kforge-bot target 'cuda', runner 'h200').\n- sm count: 132" in text


def test_compile_error_goes_back_with_the_failed_source():
    broken = BASELINE.replace("BLOCK=triton.next_power_of_2(x.shape[1])", "BLOCK=x.shape[1]")
    history = [gen.failure_from_result({"verdict": "compile_error", "reason": COMPILE_ERROR}, iteration=1, source=broken)]
    text = user_prompt(history=history)
    assert "### Attempt 1: did not compile" in text
    assert "ValueError: arange's range must be a power of 2" in text
    assert "### Your last attempt (the one that failed)\n```python\n" + broken.rstrip() in text
    assert "Your last attempt failed (see above). Find the cause and fix it." in text


def test_correctness_diff_names_the_output_the_error_and_the_tolerance():
    history = [gen.failure_from_result(INCORRECT_RESULT, iteration=2, source=BASELINE)]
    assert len(history[0]["outputs"]) == 1  # only the failing output of the failing case
    text = user_prompt(history=history)
    assert "### Attempt 2: wrong results" in text
    line = next(l for l in text.splitlines() if l.startswith("- output 0"))
    assert "float16, shape [32768, 8192]" in line and 'case "seed 0, shape set 2"' in line
    assert "max abs error 0.0625" in line and "max rel error 0.5" in line and "relative norm error 0.031" in line
    assert "tolerance atol 0.01, rtol 0.01" in line
    assert "worst: got 0.0625, expected 0.125" in line


def test_brief_style_correctness_outputs_are_read_too():
    result = {"verdict": "incorrect", "reason": "mismatch",
              "correctness": {"outputs": [{"index": 1, "max_abs": 3.5, "max_rel": 0.9, "atol": 1e-5, "rtol": 1e-5, "ok": False},
                                          {"index": 0, "ok": True}]}}
    entry = gen.failure_from_result(result)
    assert [o["index"] for o in entry["outputs"]] == [1]
    assert "- output 1: max abs error 3.5; max rel error 0.9 (tolerance atol 1e-05, rtol 1e-05)" in user_prompt(history=[entry])


def test_analyst_advice_and_cross_platform_reference():
    reference = {"target": "xpu", "language": "triton", "file": "triton/softmax.py",
                 "source": BASELINE.replace("NUM_WARPS = 2", "NUM_WARPS = 32  # Arc B580: one row per 32 subgroups"),
                 "note": "Accepted for the Arc B580 at 1.31x."}
    advice = ["Raise NUM_WARPS from 2 to 8: the 4096-wide row leaves most SM lanes idle (12% occupancy).",
              "Process two rows per program for the 8192-column shape to halve the launch count."]
    text = user_prompt(recommendations=advice, references=[reference], best_speedup=1.42)
    assert "## Performance analyst's recommendations (ranked, from the latest profile)\n1. Raise NUM_WARPS from 2 to 8" in text
    assert "2. Process two rows per program" in text
    assert "### Working implementation for `xpu` (triton)" in text and "Accepted for the Arc B580 at 1.31x." in text
    assert "NUM_WARPS = 32  # Arc B580: one row per 32 subgroups" in text
    assert "correct, 1.42x the baseline" in text and "current best is 1.42x" in text
    assert "Apply the analyst's top recommendation" in text


def test_slower_but_correct_and_malformed_history():
    slower = gen.failure_from_result({"verdict": "pass", "reason": "correct on every case; 0.912x (CI 0.905-0.919)",
                                      "speedup": 0.912, "speedup_ci": [0.905, 0.919]}, iteration=3, source=BASELINE)
    text = user_prompt(history=[slower])
    assert "### Attempt 3: correct but not faster" in text and "speedup 0.912x (95% interval 0.905-0.919)" in text
    assert "Your last attempt (the one that failed)" not in text
    assert "Try a different optimization" in text
    bad = gen.failure_from_malformed(MalformedReply("the reply had 2 ```python blocks"), iteration=4, reply="```python\na\n```\n```python\nb\n```")
    text = user_prompt(history=[slower, bad])
    assert "### Attempt 4: reply not usable" in text and "the reply had 2 ```python blocks" in text
    assert "Send the file in the required form" in text


def test_history_is_bounded_and_long_logs_are_clipped():
    log = "error: first real error here\n" + "note: template instantiation noise\n" * 500 + "1 error generated."
    history = [gen.failure_from_result({"verdict": "compile_error", "reason": log}, iteration=i) for i in range(1, 10)]
    text = user_prompt(history=history, max_history=3)
    assert "(6 earlier attempts not shown.)" in text
    assert "### Attempt 6" not in text and "### Attempt 7" in text and "### Attempt 9" in text
    assert text.count("error: first real error here") == 3  # the head of each log survives
    assert text.count("1 error generated.") == 3  # and its tail
    assert "characters cut" in text
    assert len(text) < 20000


def test_backticks_in_a_log_cannot_close_the_fence():
    history = [gen.failure_from_result({"verdict": "crash", "reason": "model wrote:\n```\nnot code\n```\nthen crashed"}, iteration=1)]
    text = user_prompt(history=history)
    assert "````text\nmodel wrote:\n```\nnot code\n```\nthen crashed\n````" in text


def test_contract_from_a_spec_like_object():
    class Spec:
        name = "rmsnorm_cuda"
        language = "cuda"
        entry = "rmsnorm"
        kernel_file = "cuda/rmsnorm_cuda.py"
        shape_sets = ({"rows": 16384, "cols": 4096},)
        tolerance = None
        format = "manifest"

    contract = gen.contract_from_spec(Spec())
    assert contract == {"name": "rmsnorm_cuda", "format": "manifest", "language": "cuda", "entry": "rmsnorm",
                        "kernel_file": "cuda/rmsnorm_cuda.py", "shape_sets": ({"rows": 16384, "cols": 4096},)}
    text = gen.build_messages(language="cuda", target_kind="cuda", hardware=H200, contract=contract, current_source="x = 1\n")[1]["content"]
    assert "tolerance: the harness's default for each dtype" in text


def test_kernelbench_contract_asks_for_model_new():
    contract = {"name": "23_Softmax", "format": "kernelbench", "entry": "ModelNew", "kernel_file": "23_Softmax.py"}
    text = gen.build_messages(language="torch", target_kind="cuda", hardware=H200, contract=contract,
                              current_source="class Model:\n    pass\n")[1]["content"]
    assert "define `class ModelNew(nn.Module)` with the same `__init__` arguments" in text


def test_gpumode_contract_asks_for_custom_kernel_of_data():
    from pathlib import Path

    from kforge_bot.kernelspec import load_spec

    spec = load_spec(Path(__file__).parents[1] / "data" / "gpumode" / "scaled_add_py")
    contract = gen.contract_from_spec(spec)
    assert contract["format"] == "gpumode" and contract["entry"] == "custom_kernel"
    text = gen.build_messages(language="triton", target_kind="cuda", hardware=H200, contract=contract,
                              current_source=spec.reference.source)[1]["content"]
    assert "GPU MODE format: define `custom_kernel(data)`, taking the one `data` object" in text


# --- a conversation through the real client -----------------------------------------------------------


def test_repair_conversation_through_the_scripted_server():
    """Malformed reply -> its feedback in the next prompt; broken code -> compile error in the next."""
    with ScriptedLLMServer([
        reply("Sure! I would raise num_warps.", prompt_tokens=1500, completion_tokens=12),
        reply("```python\n" + BASELINE.replace("NUM_WARPS = 2", "NUM_WARPS = 4").replace("BLOCK=triton.next_power_of_2(x.shape[1])", "BLOCK=x.shape[1]") + "```"),
        reply("Fixed: BLOCK must be a power of two.\n\n" + fenced(GOOD), completion_tokens=420),
    ]) as server:
        client = LLMClient(Endpoint(server.base_url, "sk-test", "kforge-test-model"), sleep=lambda s: None,
                           retry=RetryPolicy(max_attempts=2))
        history: list[dict] = []
        sources = []
        for iteration in (1, 2, 3):
            messages = gen.build_messages(language="triton", target_kind="cuda", hardware=H200, contract=CONTRACT,
                                          current_source=BASELINE, history=history)
            answer = client.chat(messages)
            try:
                source = extract_source(answer.text, "triton", "softmax", filename="triton/softmax.py", truncated=answer.truncated)
            except MalformedReply as exc:
                history.append(gen.failure_from_malformed(exc, iteration=iteration, reply=answer.text))
                continue
            sources.append(source)
            if "BLOCK=x.shape[1]" in source:  # what the harness would report for this candidate
                history.append(gen.failure_from_result({"verdict": "compile_error", "reason": COMPILE_ERROR}, iteration=iteration, source=source))
        prompts = server.prompts()
    assert sources[-1] == GOOD and len(sources) == 2
    assert "Attempts so far" not in prompts[0]
    assert "### Attempt 1: reply not usable" in prompts[1] and "no fenced code block" in prompts[1]
    assert "ValueError: arange's range must be a power of 2" in prompts[2]
    assert "BLOCK=x.shape[1]" in prompts[2].split("### Your last attempt (the one that failed)")[1]
    assert client.usage.calls == 3 and client.usage.prompt_tokens > 1500 and client.usage.completion_tokens > 432


def test_a_held_out_failure_is_told_without_its_sizes_values_or_seed():
    label = "held-out variant 1 (batch_size=67, dim=1001; inputs x2.50+0.70, 1% of elements x8) seed 4242"
    result = {"verdict": "incorrect", "reason": f"{label}: output 0: 3 of 67 elements outside atol=0.0001",
              "correctness": {"records": [
                  {"case": "shape set 0 seed 7", "outputs": [{"index": 0, "ok": True}]},
                  {"case": label, "seed": 4242, "outputs": [{"index": 0, "ok": False, "shape": [67, 1001]}]}]}}
    entry = gen.failure_from_result(result, iteration=3)
    text = user_prompt(history=[entry])
    assert entry["reason"] == gen.HELD_OUT_FEEDBACK and "held-out shape" in text
    for secret in ("1001", "67", "4242", "x2.50"):
        assert secret not in text
