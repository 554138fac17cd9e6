"""Every file a pull request controls is read through one reader (issue 38, kforge_bot.config.reader): attacks on
the GPU MODE format and the result cache, each on a real git repository, through `kforge-bot gate` in a child
process as GitHub Actions runs it, with the runner's secrets in its environment.

- a task.yml `files:` entry climbing out with `../`, or naming a committed symbolic link, to /proc/self/environ:
  the bot's own environment (its keys) must reach neither the PR's code nor the gate's JSON, summary or log;
- a problem folder named as a link, an image or a mention: it must not render in the job summary;
- a `.kforge-cache/` the pull request commits, with a "pass" in it: never read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.gate_repos import POLICY, by_id, cli, init_repo, one_kernel_repo
from fakes.gitrepos import commit_all, git, write
from fakes.markdown import assert_nothing_live

GPUMODE = Path(__file__).resolve().parents[1] / "data" / "gpumode"
CANARY = "canary-8c1f0e"
SECRETS = {"OPENAI_API_KEY": f"sk-{CANARY}", "KFORGE_CACHE_SECRET": f"key-{CANARY}", "GITHUB_TOKEN": f"ghs_{CANARY}"}

# The PR's problem: its reference hands the bot-read `leak.py` (whatever the bot put there) back as an error.
LEAKING_REFERENCE = '''\
import pathlib

import torch

LEAKED = (pathlib.Path(__file__).parent / "leak.py").read_text(errors="replace")


def generate_input(size: int, seed: int):
    return torch.ones(size)


def ref_kernel(data):
    raise RuntimeError("leaked: " + " ".join(p for p in LEAKED.split("\\0") if "canary" in p))
'''
LEAKING_SUBMISSION = "def custom_kernel(data):\n    return data\n"


def leaking_task(source: str) -> str:
    return ('files:\n  - {"name": "submission.py", "source": "@SUBMISSION@"}\n'
            f'  - {{"name": "leak.py", "source": "{source}"}}\nlang: "py"\n'
            'tests:\n  - {"size": 8, "seed": 1}\n')


def actions_env(tmp: Path) -> dict[str, str]:
    summary = tmp / "summary.md"
    summary.touch()
    return {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), **SECRETS}


def gate(root: Path, tmp: Path, *args: str) -> tuple[object, dict | None, str]:
    env = actions_env(tmp)
    report_path = tmp / "gate.json"
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", "--json", str(report_path), *args, cwd=root,
               env=env)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return proc, report, Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def base_repo(root: Path) -> None:
    init_repo(root)
    shutil.copytree(GPUMODE, root / "gm", ignore=shutil.ignore_patterns("candidates"))
    write(root, "policy.yml", POLICY)
    commit_all(root, "base")


@pytest.mark.parametrize("how", ["dots", "link"])
def test_a_task_files_entry_cannot_reach_the_bots_environment(tmp_path, how):
    """A new problem whose task.yml names /proc/self/environ (by `../`, or by a committed link): the bot refuses to
    read it, one line naming the key, and no secret of its environment shows anywhere."""
    root = tmp_path / "repo"
    base_repo(root)
    problem = root / "gm" / "leak_py"
    write(root, "gm/leak_py/reference.py", LEAKING_REFERENCE)
    write(root, "gm/leak_py/submission.py", LEAKING_SUBMISSION)
    if how == "dots":
        source = "../" * 40 + "proc/self/environ"
    else:
        (problem / "env").symlink_to("/proc/self/environ")
        source = "env"
    write(root, "gm/leak_py/task.yml", leaking_task(source))
    commit_all(root, "head: a problem that reads the bot's environment")
    proc, report, summary = gate(root, tmp_path, "--no-cache")
    everything = proc.stdout + proc.stderr + json.dumps(report) + summary
    assert CANARY not in everything, "a secret of the bot's environment reached the gate's output"
    assert report is not None, proc.stderr
    entry = by_id(report)["gm/leak_py"]
    assert entry["verdict"] == "error" and "files[1].source" in entry["reason"], entry
    assert "resolves outside the checkout" in entry["reason"], entry
    assert proc.returncode == 1


@pytest.mark.parametrize("name", ["[x](evil.example)", "![i](e.png)", "@octo-org"])
def test_a_problem_folder_name_renders_nothing_in_the_summary(tmp_path, name):
    """A problem folder named as a link, an image or a mention is no kernel name: refused in one line, and the name
    renders nothing in the job summary."""
    root = tmp_path / "repo"
    base_repo(root)
    shutil.copytree(GPUMODE / "scaled_add_py", root / "gm" / name)
    commit_all(root, "head: a problem folder named as Markdown")
    proc, report, summary = gate(root, tmp_path, "--no-cache")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "a problem folder's path may use letters, digits and ._-/ only" in proc.stderr.strip().splitlines()[-1]
    assert_nothing_live(summary, name)
    if report is not None:
        assert not any(name in k["name"] for k in report["kernels"])


@pytest.mark.slow
@pytest.mark.parametrize("pointed", [False, True])
def test_a_committed_signed_pass_is_never_read(tmp_path, monkeypatch, pointed):
    """The pull request commits `.kforge-cache/` holding a "pass" for its wrong submission, signed with the key (as
    one leaked could sign it). By default the gate's cache is not in the checkout; pointed there
    ($KFORGE_CACHE_DIR), the gate refuses it with one note. Either way the wrong submission is measured: incorrect."""
    from kforge_bot.cache import ResultCache
    from kforge_bot.config.policy import load_policy
    from kforge_bot.gate.run import run_gate

    secret = f"key-{CANARY}"
    monkeypatch.setenv("KFORGE_CACHE_SECRET", secret)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("KFORGE_CACHE_DIR", raising=False)
    root = tmp_path / "repo"
    base_repo(root)
    submission = root / "gm" / "scaled_add_py" / "submission.py"
    submission.write_text(submission.read_text().replace("alpha=2", "alpha=3"))
    commit_all(root, "head: a wrong submission")
    planned = run_gate(root, "HEAD~1", policy=load_policy(root / "policy.yml"), measure=False,
                       cache_dir=tmp_path / "plan-cache")
    (entry,) = planned.kernels
    forged = {**entry.to_dict(), "verdict": "pass", "reason": "forged", "measured": True}
    ResultCache(root / ".kforge-cache", secret=secret.encode()).put(entry.key, {}, forged)
    (root / ".kforge-cache" / ".gitignore").unlink()
    commit_all(root, "head: and its signed pass")
    env = {"KFORGE_CACHE_SECRET": secret, "XDG_CACHE_HOME": str(tmp_path / "xdg-cache")}
    if pointed:
        env["KFORGE_CACHE_DIR"] = str(root / ".kforge-cache")
    report_path = tmp_path / "gate.json"
    proc = cli("gate", "--base", "HEAD~2", "--policy", "policy.yml", "--json", str(report_path), cwd=root, env=env)
    report = json.loads(report_path.read_text())
    got = by_id(report)["gm/scaled_add_py"]
    assert got["verdict"] == "incorrect" and not got.get("cached"), got
    assert proc.returncode == 1, proc.stderr
    refused = [n for n in report["notes"] if "inside the checkout under test" in n]
    assert len(refused) == (1 if pointed else 0), report["notes"]
    assert git(root, "status", "--porcelain").strip() == "", "the gate wrote into the checkout"


def test_a_change_to_the_problems_shared_utils_is_a_change_to_each_problem(tmp_path):
    """Red-team probe (issue 38), which held before too: `files:` names `../utils.py`, which the problem's code
    imports; a change to it alone is a change to the problem's spec (its support files), so the problem is planned,
    never "unchanged"."""
    from kforge_bot.config.policy import load_policy
    from kforge_bot.gate.run import run_gate

    root = tmp_path / "repo"
    base_repo(root)
    utils = root / "gm" / "utils.py"
    utils.write_text(utils.read_text() + "\n\ndef make_match_reference(*args, **kwargs):\n"
                     "    return lambda data, output: (True, '')\n")
    commit_all(root, "head: the shared checker passes everything")
    planned = run_gate(root, "HEAD~1", policy=load_policy(root / "policy.yml"), measure=False, use_cache=False)
    assert "gm/scaled_add_py" not in planned.unchanged
    assert "gm/scaled_add_py" in {k.id for k in planned.kernels}


@pytest.mark.parametrize("where", ["anywhere", "reference"])
def test_a_committed_link_loop_is_one_line_not_a_traceback(tmp_path, where):
    """Red-team pass: a head that commits a symbolic link loop (`loop.py -> loop.py` anywhere in the checkout, or a
    reference `a.py -> b.py -> a.py`) crashed `kforge-bot gate` with a Python traceback that named the runner's
    temporary checkout (discovery, the manifest's paths and the cache key's digests resolved with
    `Path.resolve()`, which raises on a loop). Now the loop is a file that cannot be read: one line, no traceback."""
    root = tmp_path / "repo"
    one_kernel_repo(root, "k", policy=POLICY)
    if where == "anywhere":
        (root / "loop.py").symlink_to("loop.py")
    else:
        (root / "a.py").symlink_to("b.py")
        (root / "b.py").symlink_to("a.py")
        write(root, "kforge.yaml", (root / "kforge.yaml").read_text().replace("ref.py:reference", "a.py:reference"))
    commit_all(root, "head: a link loop")
    proc, report, summary = gate(root, tmp_path, "--no-cache")
    assert "Traceback" not in proc.stderr and "RuntimeError" not in proc.stderr, proc.stderr
    assert "kforge-wt-" not in proc.stdout + proc.stderr + summary, "the runner's temporary checkout was named"
    assert report is not None, proc.stderr
    if where == "reference":
        entry = by_id(report)["k"]
        assert entry["verdict"] == "error" and "kernels.k.reference" in entry["reason"], entry
        assert proc.returncode == 1
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
