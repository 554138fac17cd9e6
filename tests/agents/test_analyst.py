"""The analyst's prompt (profile digest in) and its parser (ranked recommendations out)."""

from __future__ import annotations

import pytest
from fakes.llm_server import ScriptedLLMServer, reply

from kforge_bot.agents import analyst
from kforge_bot.agents.llm import Endpoint, LLMClient
from kforge_bot.errors import MalformedReply

# A digest shaped like the harness's (evaluate/worker/profile.py) plus ncu counters and a roofline position
# (hardware.roofline) as the loop attaches them.
DIGEST = {
    "ops": ["aten::empty_like"],
    "compute_ops": [],
    "kernels": [
        {"name": "_softmax_kernel", "calls": 1, "us": 110.4},
        {"name": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "calls": 1, "us": 1.9},
    ],
    "streams": {"7": 2},
    "current_stream": 7,
    "streams_checked": True,
    "side_stream_kernels": [],
    "device_us": 112.3,
    "ncu": {"_softmax_kernel": {"sm_throughput_pct": 31.5, "dram_throughput_pct": 28.7, "achieved_occupancy_pct": 12.4,
                                "registers_per_thread": 96, "spill_bytes": 0}},
    "roofline": {"achieved_gbs": 1216.0, "achieved_tflops": 0.61, "arithmetic_intensity": 0.5, "ridge_intensity": 206.0,
                 "bandwidth_fraction": 0.289, "compute_fraction": 0.0009, "roofline_fraction": 0.289, "bound": "memory"},
    "torch_version": "2.13.0",
}
HARDWARE = {"name": "NVIDIA H200", "sms": 132, "measured_copy_gbs": 4200, "peak_tflops_bf16": 989}


def test_prompt_renders_times_counters_and_roofline():
    system, user = analyst.build_messages(digest=DIGEST, hardware=HARDWARE, contract={"name": "softmax", "kernel_file": "triton/softmax.py"},
                                          source="NUM_WARPS = 2\n", language="triton", tried=["NUM_WARPS 2 -> 4: 1.08x"], speedup=1.08)
    assert system["role"] == "system" and "at most 5 concrete changes" in system["content"]
    text = user["content"]
    assert "# Profile of `softmax` on NVIDIA H200 (the current best, 1.08x the baseline)" in text
    assert "- measured_copy_gbs: 4200" in text
    assert "| name | calls | us |" in text and "| _softmax_kernel | 1 | 110.4 |" in text
    assert text.index("_softmax_kernel | 1 | 110.4") < text.index("FillFunctor")  # longest kernel first
    assert "| kernel | sm_throughput_pct | dram_throughput_pct | achieved_occupancy_pct | registers_per_thread | spill_bytes |" in text
    assert "| _softmax_kernel | 31.5 | 28.7 | 12.4 | 96 | 0 |" in text
    assert "- roofline_fraction: 28.9% of the roofline ceiling at this intensity" in text
    assert "- bandwidth_fraction: 28.9% of the peak bandwidth" in text
    assert "- bound: memory" in text and "Heuristic reading of the numbers below: memory-bound." in text
    assert "Device time per call: 112.3 us." in text
    assert '{"torch_version": "2.13.0"}' in text
    assert "current_stream" not in text and "streams_checked" not in text  # harness bookkeeping stays out
    assert "- NUM_WARPS 2 -> 4: 1.08x" in text
    assert "## Current source (triton)\n```python\nNUM_WARPS = 2\n```" in text


def test_prompt_without_a_profile_says_so():
    text = analyst.build_messages(digest={})[1]["content"]
    assert "(no profile data was collected)" in text


def test_side_stream_and_framework_ops_are_shown():
    text = analyst.render_digest({"compute_ops": ["aten::_softmax"], "side_stream_kernels": ["k_side"], "kernels": []})
    assert "Framework compute ops called: `aten::_softmax`" in text and "side stream (timed only if joined back to the current stream before the call returns): k_side" in text


def test_parse_takes_the_recommendations_list():
    text = """The kernel reads 1.2 TB/s against a 4.2 TB/s copy ceiling.

Observations:
1. Occupancy is 12%.
2. No spills.

Recommendations:
1. **Raise NUM_WARPS from 2 to 8**: with 96 registers per thread and 12% occupancy, the 4096-wide
   row reduction has too few loads in flight.
2) Keep the whole row in registers and drop the second pass over memory.
3. Store the output as fp16 directly instead of through an fp32 temporary.

Expected effect:
1. About 2x on the 8192-column shape.
"""
    assert analyst.parse_recommendations(text) == [
        "Raise NUM_WARPS from 2 to 8: with 96 registers per thread and 12% occupancy, the 4096-wide row reduction has too few loads in flight.",
        "Keep the whole row in registers and drop the second pass over memory.",
        "Store the output as fp16 directly instead of through an fp32 temporary.",
    ]


def test_parse_without_a_heading_takes_the_last_list_and_caps_it():
    items = "\n".join(f"{i}. change number {i}" for i in range(1, 9))
    assert analyst.parse_recommendations("Steps I took:\n1. read\n2. think\n\n" + items, max_items=3) == [
        "change number 1", "change number 2", "change number 3"]


def test_parse_ignores_code_and_clips_long_items():
    text = "Recommendations:\n1. Use this:\n```python\n1. not an item\n```\n2. " + "x" * 900
    out = analyst.parse_recommendations(text)
    assert out[0] == "Use this:" and len(out) == 2 and len(out[1]) == 500 and out[1].endswith("...")


@pytest.mark.parametrize("text", ["", "   ", "The kernel looks fine to me; nothing to change.", "- a bullet\n- another"])
def test_malformed_replies(text):
    with pytest.raises(MalformedReply) as info:
        analyst.parse_recommendations(text)
    assert "numbered list" in info.value.feedback or "empty" in info.value.feedback


def test_analyst_through_the_scripted_server():
    advice = "Recommendations:\n1. Raise NUM_WARPS from 2 to 8.\n2. Fuse the max and sum passes.\n"
    with ScriptedLLMServer([reply("I think it is memory-bound."), reply(advice)]) as server:
        client = LLMClient(Endpoint(server.base_url, "sk", "kforge-test-model"), sleep=lambda s: None)
        messages = analyst.build_messages(digest=DIGEST, hardware=HARDWARE, contract={"name": "softmax"})
        with pytest.raises(MalformedReply):
            analyst.parse_recommendations(client.chat(messages).text)
        recs = analyst.parse_recommendations(client.chat(messages).text)
        sent = server.prompts()
    assert recs == ["Raise NUM_WARPS from 2 to 8.", "Fuse the max and sum passes."]
    assert all("| _softmax_kernel | 31.5 | 28.7 | 12.4 | 96 | 0 |" in p for p in sent)


def test_the_counter_table_shows_before_and_after_with_the_class() -> None:
    from pathlib import Path

    from kforge_bot.agents.analyst import render_digest
    from kforge_bot.counters.ncu_parse import parse_raw

    rows = parse_raw((Path(__file__).parents[1] / "data" / "ncu" / "raw_h200_scale_softmax.csv").read_text())
    text = render_digest({"ncu": rows, "ncu_before": rows,
                          "ncu_summary": {"class": "compute-bound", "speed_of_light": 0.694}})
    assert "Roofline class by the counters: compute-bound, 69% of speed of light." in text
    assert "| before | scale |" in text and "| after | scale |" in text
    assert "ncu_before" not in text  # rendered as the table, not dumped as JSON
