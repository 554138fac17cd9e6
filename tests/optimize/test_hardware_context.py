"""What the agents are told about the device (kforge_bot.optimize.hardware_context)."""

from __future__ import annotations

from kforge_bot.optimize.hardware_context import hardware_context, hardware_text


def test_a_known_device_brings_its_facts_and_the_projects_ceilings() -> None:
    facts, ceilings, origin = hardware_context("cuda", "NVIDIA H200")
    assert facts is not None and facts.name == "h200"
    assert ceilings is not None and ceilings["origin"] == "reference" and ceilings["bandwidth_gbs"] > 0
    assert origin.startswith("project measurement")
    text = hardware_text("cuda", "NVIDIA H200", facts, ceilings)
    assert text.startswith("Device: NVIDIA H200") and "- this machine reports: NVIDIA H200" in text
    assert f"roofline ceilings (reference): memory bandwidth {ceilings['bandwidth_gbs']:g} GB/s" in text


def test_an_unknown_device_says_how_to_measure_it() -> None:
    facts, ceilings, origin = hardware_context("cpu", "")
    assert facts is None and ceilings is None and "kforge-bot doctor --save" in origin
    assert hardware_text("xpu", "", None, None) == "Device: unknown (target 'xpu')."
    measured = {"bandwidth_gbs": 50.0, "tflops": {"fp32": 1.5}, "origin": "measured"}
    assert hardware_text("cpu", "Test CPU", None, measured).splitlines() == [
        "Device: Test CPU (target 'cpu').", "- roofline ceilings (measured): memory bandwidth 50 GB/s, fp32 1.5 TFLOP/s"]
