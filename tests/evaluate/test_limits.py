"""Each worker's limits (kforge_bot.evaluate.wire.limits): the defaults, where the policy sets them, and how they are
set on a process. That they stop real bombs is tested in test_isolation.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kforge_bot.config.policy import parse_policy
from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.wire.limits import GIB, Limits, folder_bytes, limits_for
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.scratch import remove_scratch
from kforge_bot.gate.measure import gate_settings


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
from kforge_bot.evaluate.wire.limits import Limits, apply
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


def test_the_sandboxes_private_folders_are_in_its_scratch(tmp_path: Path) -> None:
    # Counted with the scratch by its one limit (tmpfs mounts of their own were three more scratches, unseen).
    view = isolation.View(scratch=tmp_path)
    argv = isolation.command(["true"], view, "bwrap")
    for private in ("/tmp", "/dev/shm", "/run"):
        at = argv.index(private, argv.index("--proc"))
        assert argv[at - 2] == "--bind" and Path(argv[at - 1]).is_dir(), private
        assert Path(argv[at - 1]).is_relative_to(tmp_path.resolve()), private

def test_files_in_a_locked_folder_or_past_path_max_are_not_unseen(tmp_path: Path) -> None:
    # Red-team pass: files below a folder the bot may not read (chmod 000) or nested past PATH_MAX went uncounted.
    import os

    (tmp_path / "locked" / "inner").mkdir(parents=True)
    (tmp_path / "locked" / "inner" / "f").write_bytes(b"x" * (1 << 20))
    (tmp_path / "locked" / "inner").chmod(0)
    (tmp_path / "locked").chmod(0)
    assert (1 << 20) <= folder_bytes(str(tmp_path), 10 << 20) < (2 << 20)  # given back their permissions, counted
    deep = tmp_path / "deep"
    deep.mkdir()
    here = os.getcwd()
    try:
        os.chdir(deep)
        for _ in range(2100):  # "d/" a level: past PATH_MAX (4096)
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    try:
        assert folder_bytes(str(deep), 10 << 20) > 10 << 20  # what it holds past PATH_MAX is unseen: full
    finally:
        remove_scratch(deep)  # pytest's own clean-up recurses a level at a time
