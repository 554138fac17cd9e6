"""Each worker's limits (kforge_bot.evaluate.limits): the defaults, where the policy sets them, and how they are
set on a process. That they stop real bombs is tested in test_isolation.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.limits import GIB, Limits, folder_bytes, limits_for
from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.gate.measure import gate_settings
from kforge_bot.policy import parse_policy


def test_defaults_leave_gpu_memory_alone_and_count_processes_only_in_the_sandbox(tmp_path: Path) -> None:
    cpu = limits_for(EvalSettings(timeout_s=100), "cpu", True, str(tmp_path))
    assert cpu.memory_bytes and cpu.memory_bytes >= GIB // 2 and cpu.processes == 4096
    assert cpu.cpu_s >= 100 and GIB <= cpu.scratch_bytes <= 64 * GIB
    cuda = limits_for(EvalSettings(), "cuda:0", True, str(tmp_path))
    assert cuda.memory_bytes is None  # a CUDA context reserves address space by the terabyte
    assert limits_for(EvalSettings(), "cpu", False, str(tmp_path)).processes is None  # per user, unsandboxed
    set_here = EvalSettings(memory_limit_bytes=3 * GIB, process_limit=99, cpu_limit_s=7, scratch_limit_bytes=GIB)
    assert limits_for(set_here, "cuda", True, str(tmp_path)) == Limits(3 * GIB, 99, 7, GIB)


def test_the_policys_limits_reach_the_gates_settings() -> None:
    policy = parse_policy({"evaluation": {"memory_limit_gb": 2, "process_limit": 64, "cpu_limit_s": 30,
                                          "scratch_limit_gb": 0.5}}, "p.yml")
    rule = policy.rule_for("k", "k.py", "cpu")
    settings = gate_settings(policy, rule)
    assert (settings.memory_limit_bytes, settings.process_limit, settings.cpu_limit_s,
            settings.scratch_limit_bytes) == (2 * GIB, 64, 30, GIB // 2)


PRINT_LIMITS = """
import json, resource, sys
from kforge_bot.evaluate.limits import Limits, apply
apply(Limits.from_dict(json.loads(sys.argv[1])))
print(json.dumps({n: resource.getrlimit(getattr(resource, n)) for n in
                  ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_CPU", "RLIMIT_FSIZE")}))
"""


def test_limits_are_set_hard_so_user_code_cannot_raise_them() -> None:
    limits = Limits(memory_bytes=3 * GIB, processes=500, cpu_s=60, scratch_bytes=GIB)
    out = subprocess.run([sys.executable, "-c", PRINT_LIMITS, json.dumps(limits.to_dict())], check=True,
                         capture_output=True, text=True).stdout
    assert json.loads(out) == {"RLIMIT_AS": [3 * GIB] * 2, "RLIMIT_NPROC": [500] * 2, "RLIMIT_CPU": [60, 65],
                               "RLIMIT_FSIZE": [GIB] * 2}


def test_a_folder_is_measured_until_it_passes_the_limit(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * (1 << 20))
    assert (1 << 20) <= folder_bytes(str(tmp_path), 10 << 20) < (2 << 20)
    assert folder_bytes(str(tmp_path / "missing"), 1) == 0


def test_the_sandboxes_private_tmpfs_mounts_are_sized(tmp_path: Path) -> None:
    view = isolation.View(scratch=tmp_path, tmpfs_bytes=256 << 20)
    argv = isolation.command(["true"], view, "bwrap")
    if not isolation._sizes_tmpfs("bwrap"):
        pytest.skip("this bwrap has no --size (before 0.7.0): the private tmpfs mounts stay unsized")
    for private in ("/tmp", "/dev/shm", "/run"):
        at = argv.index(private, argv.index("--proc"))
        assert argv[at - 3:at] == ["--size", str(256 << 20), "--tmpfs"], private
