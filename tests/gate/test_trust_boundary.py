"""The gate judges a change by the base's rules (issue 28): attacks a pull request can make, each on a real git
repository, through the real CLI in a child process as GitHub Actions runs it.

1. configuration read from the head: the head's policy file turns isolation off and the threshold up;
2. the head writes its own test: tolerance, reference, inputs or shapes edited beside a wrong kernel;
5. paths outside the checkout: a symbolic link, an absolute path, a '..';
8. YAML anchors and aliases in the head's kforge.yaml;
9. injection: a kernel name or a kernel's exception carrying workflow commands; an error quoting Markdown.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakes.gate_repos import PLAIN, POLICY, REF, by_id, cli, entry, init_repo, one_kernel_repo
from fakes.gitrepos import commit_all, git, write
from fakes.markdown import assert_nothing_live
from fakes.webhooks import example

# Wrong kernels, each right only where its pull request's own test looks.
OFF_BY_HALF = PLAIN.replace("x * 2.0 + y", "x * 2.0 + y + 0.5")
MINUS = PLAIN.replace("x * 2.0 + y", "x * 2.0 - y")
CLAMPED = PLAIN.replace("x * 2.0 + y", "x.clamp(-2.0, 2.0) * 2.0 + y")  # wrong wherever |x| > 2 (5% of randn)
SMALL_ONLY = PLAIN.replace("    return x * 2.0 + y", "    if x.numel() > 64 * 64:\n        return x * 2.0 - y\n"
                                                    "    return x * 2.0 + y")
INPUTS = """\
import torch


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
"""
REF_OWN = REF.replace("def make_inputs", "def unused_make_inputs")


def actions_env(tmp: Path, labels: tuple[str, ...] = (), *, added: str | None = None,
                head_sha: str | None = None) -> dict[str, str]:
    """GitHub Actions' environment for a pull_request run: the summary file and the event (with its labels). With
    `added`, the event is a maintainer adding that label to the revision `head_sha`; else a push (synchronize)."""
    summary = tmp / "summary.md"
    summary.touch()
    payload = example("pull_request", "labeled" if added else "synchronize")
    payload["pull_request"]["labels"] = [{"name": label} for label in labels]
    if added:
        payload["label"] = {**payload["label"], "name": added}
    if head_sha:
        payload["pull_request"]["head"]["sha"] = head_sha
    event = tmp / "event.json"
    event.write_text(json.dumps(payload))
    return {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event)}


def no_foreign_commands(*outputs: str) -> None:
    """No line the runner would read as a workflow command but the gate's own annotations (on a kernel file)."""
    for text in outputs:
        for line in text.replace("\r", "\n").split("\n"):
            if line.lstrip().startswith("::"):
                assert line.startswith(("::error file=", "::warning file=")), f"a foreign workflow command: {line!r}"
            assert "##[" not in line, f"a foreign workflow command: {line!r}"


# ------------------------------------------------------------------ 2: the head writes its own test


def gate_run(tmp: Path, root: Path, fake_workers: bool = False) -> dict:
    """The gate on `root`'s feature branch against main, as a pull_request run under Actions (`fake_workers`: on
    the scripted workers of tests/fakes/workers.py)."""
    env = actions_env(tmp)
    if fake_workers:
        env["KFORGE_TEST_FAKE_WORKERS"] = "1"
    report_path = tmp / "report.json"
    proc = cli("gate", "--base", "main", "--policy", "policy.yml", "--json", str(report_path), "--no-cache",
               cwd=root, env=env)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return {"proc": proc, "report": report, "summary": Path(env["GITHUB_STEP_SUMMARY"]).read_text()}


def loosen(tmp: Path, fake_workers: bool = False) -> dict:
    """Six correct kernels; the change makes each wrong and loosens the part of its test (or the policy rule) that
    would show it. `fake_workers`: each wrong kernel says so to the scripted workers."""
    root = tmp / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "own_ref.py", REF_OWN)
    write(root, "own_inputs.py", INPUTS)
    for name in ("tol", "refedit", "inputs", "shapes", "dodge", "moved"):
        write(root, f"{name}.py", PLAIN)
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("tol") + entry("refedit", reference="own_ref.py:reference")
          + entry("inputs", inputs="own_inputs.py:make_inputs") + entry("shapes") + entry("dodge") + entry("moved"))
    write(root, "policy.yml", POLICY.replace("gate: {threshold: 0.25, confidence: 0.95}",
                                             "gate: {threshold: 0.25, confidence: 0.95, "
                                             "rules: [{path: 'experimental/**', skip: true}]}"))
    commit_all(root, "six correct kernels")
    git(root, "checkout", "-q", "-b", "feature")
    wrong = "# fake-worker: wrong\n" if fake_workers else ""
    write(root, "tol.py", OFF_BY_HALF + wrong)
    write(root, "refedit.py", MINUS + wrong)
    write(root, "own_ref.py", REF_OWN.replace("x * 2.0 + y", "x * 2.0 - y"))
    write(root, "inputs.py", CLAMPED + wrong)
    write(root, "own_inputs.py", INPUTS.replace("torch.randn(n, n), torch", "torch.randn(n, n).clamp(-2, 2), torch"))
    write(root, "shapes.py", SMALL_ONLY + wrong)
    write(root, "dodge.py", MINUS + wrong)  # wrong, and declared for a device the CPU gate does not have
    write(root, "experimental/moved.py", MINUS + wrong)  # wrong, and moved under the policy's skip rule
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("tol", extra="    tolerance: {atol: 1.0, rtol: 1.0}\n")
          + entry("refedit", reference="own_ref.py:reference")
          + entry("inputs", inputs="own_inputs.py:make_inputs") + entry("shapes", sizes=(32,))
          + entry("dodge").replace("targets: [cpu]", "targets: [cuda]")
          + entry("moved", file="experimental/moved.py"))
    commit_all(root, "faster kernels")
    return gate_run(tmp, root, fake_workers)


@pytest.fixture(scope="module")
def loosened(tmp_path_factory):
    return loosen(tmp_path_factory.mktemp("loosened"))


@pytest.fixture(scope="module")
def loosened_scripted(tmp_path_factory):
    """`loosened` on scripted workers: the gate's own reading of a change to a kernel's test, in the fast lane (the
    attack itself runs on real workers above, in the slow lane)."""
    return loosen(tmp_path_factory.mktemp("loosened-scripted"), fake_workers=True)


@pytest.mark.slow
@pytest.mark.parametrize("kernel,part", [("tol", "tolerance"), ("refedit", "reference"), ("inputs", "inputs"),
                                         ("shapes", "shapes"), ("dodge", "targets")])
def test_a_change_cannot_loosen_its_own_test(loosened, kernel, part):
    """Class 2: each kernel is wrong under the base's test and right under the one its change wrote."""
    report = loosened["report"]
    assert report is not None, loosened["proc"].stderr
    got = by_id(report)[kernel]
    assert got["verdict"] == "spec-changed", got
    assert got["spec_changes"] == [part] and got["under_spec"] == {"base": "incorrect"}, got
    assert f"edits this kernel's {part}" in got["reason"] and "kforge:spec-change" in got["reason"]
    assert loosened["proc"].returncode == 1


@pytest.mark.slow
def test_a_change_cannot_move_its_kernel_under_a_skip_rule(loosened):
    """Class 1: the base's policy skips `experimental/**`; the change moves its wrong kernel there. The rule that
    applies is the one for the kernel's path in the base."""
    got = by_id(loosened["report"])["moved"]
    assert got["verdict"] == "incorrect" and got["spec_changes"] == [], got


@pytest.mark.parametrize("kernel,part", [("tol", "tolerance"), ("refedit", "reference"), ("inputs", "inputs"),
                                         ("shapes", "shapes"), ("dodge", "targets")])
def test_scripted_a_change_to_its_own_test_is_spec_changed(loosened_scripted, kernel, part):
    report = loosened_scripted["report"]
    assert report is not None, loosened_scripted["proc"].stderr
    got = by_id(report)[kernel]
    assert got["verdict"] == "spec-changed", got
    assert got["spec_changes"] == [part] and got["under_spec"] == {"base": "incorrect"}, got
    assert f"edits this kernel's {part}" in got["reason"] and "kforge:spec-change" in got["reason"]
    assert by_id(report)["moved"]["verdict"] == "incorrect"  # the base's path rules, not the head's skip
    assert loosened_scripted["proc"].returncode == 1


def loosened_tolerance_repo(tmp_path: Path) -> Path:
    """A wrong kernel (off by a half) whose change loosens its own tolerance until it passes."""
    root = one_kernel_repo(tmp_path / "repo", "tol", policy=POLICY)
    write(root, "tol.py", OFF_BY_HALF)
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("tol", extra="    tolerance: {atol: 1.0, rtol: 1.0}\n"))
    commit_all(root, "a looser tolerance, on purpose")
    return root


@pytest.mark.slow
def test_a_maintainers_label_lets_the_heads_test_count_and_both_are_reported(tmp_path):
    """Class 2, approved: a maintainer adding the policy's spec-change label to this revision lets the head's test
    decide, and the report shows the verdict under each spec."""
    root = loosened_tolerance_repo(tmp_path)
    head = git(root, "rev-parse", "HEAD").strip()
    report_path = tmp_path / "report.json"
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", "--json", str(report_path), "--no-cache",
               cwd=root, env=actions_env(tmp_path, labels=("kforge:spec-change",), added="kforge:spec-change",
                                         head_sha=head))
    got = by_id(json.loads(report_path.read_text()))["tol"]
    assert got["under_spec"] == {"base": "incorrect", "head": got["verdict"]}, got
    # Correct under the head's tolerance: a timing verdict, or `inconclusive` where its interval straddled the
    # threshold (CI's clean-clone run of 396ef06: +19.1% (+8.9% to +33.8%) at 25%) - never `incorrect`.
    assert got["verdict"] in ("pass", "improved", "regression", "inconclusive") and proc.returncode in (0, 1), \
        proc.stderr
    assert "approved with the 'kforge:spec-change' label" in got["reason"] and "under the base's spec: incorrect" in got[
        "reason"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["pushed after the label", "label added to an earlier revision"])
def test_a_label_approves_only_the_revision_it_was_added_to(tmp_path, how):
    """Red team: a maintainer approved one change to the test; the author pushed again (the label stays on the pull
    request) and the push loosened the tolerance until a wrong kernel passed. The label left on the pull request
    used to approve every later push; now only the `labeled` event for this very revision does."""
    root = loosened_tolerance_repo(tmp_path)
    head = git(root, "rev-parse", "HEAD").strip()
    env = (actions_env(tmp_path, labels=("kforge:spec-change",)) if how == "pushed after the label" else
           actions_env(tmp_path, labels=("kforge:spec-change",), added="kforge:spec-change",
                       head_sha=git(root, "rev-parse", "HEAD~1").strip()))
    report_path = tmp_path / "report.json"
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", "--json", str(report_path), "--no-cache",
               cwd=root, env=env)
    report = json.loads(report_path.read_text())
    got = by_id(report)["tol"]
    assert got["verdict"] == "spec-changed" and proc.returncode == 1, (got, proc.stderr)
    assert head and any("approves only the revision it was added to" in note for note in report["notes"]), report


# ------------------------------------------------------------------------------ 5 and 9, a gate run each


def feature_branch_repo(tmp: Path) -> Path:
    """A repository with one correct kernel on main, on a new branch `feature`."""
    root = one_kernel_repo(tmp / "repo", "plain", policy=POLICY, message="one kernel")
    git(root, "checkout", "-q", "-b", "feature")
    return root


@pytest.fixture(scope="module")
def escaping(tmp_path_factory):
    """Class 5: a symbolic link out of the checkout, an absolute path, a '..'."""
    tmp = tmp_path_factory.mktemp("escaping")
    root = feature_branch_repo(tmp)
    outside = tmp / "outside"
    write(outside, "secret_kernel.py", PLAIN.replace("import torch", "import torch\n\nSECRET = 'canary-8c1f'"))
    write(outside, "secret_ref.py", REF)
    (root / "leak.py").symlink_to(outside / "secret_kernel.py")
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("plain") + entry("leak")
          + entry("absref", file="plain.py", reference=f"{outside / 'secret_ref.py'}:reference")
          + entry("dotref", file="plain.py", reference="../outside/secret_ref.py:reference"))
    commit_all(root, "more kernels")
    return gate_run(tmp, root)


@pytest.fixture(scope="module")
def hostile_text(tmp_path_factory):
    """Class 9: a kernel whose import raises with workflow commands in its message; an entry that quotes Markdown."""
    tmp = tmp_path_factory.mktemp("hostile")
    root = feature_branch_repo(tmp)
    write(root, "boom.py", 'raise RuntimeError("boom [/dim] [bold]\\n::error title=pwned::from a kernel\\n##[error]pwned v1")\n'
                           + PLAIN)
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("plain") + entry("boom")
          + "  md:\n    file: plain.py\n    entry: '![x](https://evil.example/t.png)'\n    inputs: ref.py:make_inputs\n")
    commit_all(root, "more kernels")
    return gate_run(tmp, root)


@pytest.mark.slow
@pytest.mark.parametrize("kernel,key", [("leak", "kernels.leak.file"), ("absref", "kernels.absref.reference"),
                                        ("dotref", "kernels.dotref.reference")])
def test_no_path_leaves_the_checkout(escaping, kernel, key):
    """Class 5: a manifest path that resolves outside the checkout is an error naming its key, never read."""
    assert escaping["report"] is not None, escaping["proc"].stderr
    got = by_id(escaping["report"])[kernel]
    assert got["verdict"] == "error" and f"{key}: " in got["reason"] and "the checkout" in got["reason"], got
    assert "canary-8c1f" not in escaping["proc"].stdout + escaping["proc"].stderr + json.dumps(escaping["report"])


@pytest.mark.slow
def test_what_a_change_wrote_is_no_workflow_command_and_no_markdown(hostile_text):
    """Class 9: a kernel's exception with `::error` and `##[error]` lines; an error quoting an `entry:` written as an
    image. The console carries no command but the gate's own annotations; the job summary renders nothing of it."""
    proc = hostile_text["proc"]
    assert hostile_text["report"] is not None, proc.stderr
    assert by_id(hostile_text["report"])["boom"]["verdict"] == "error"
    assert "pwned" in proc.stdout + proc.stderr  # shown, as text
    no_foreign_commands(proc.stdout, proc.stderr)
    summary = hostile_text["summary"]
    assert "![x](https://evil.example/t.png)" in summary
    assert_nothing_live(summary, "![x]", "](https://evil")


def test_a_kernel_name_cannot_write_a_workflow_command(tmp_path):
    """Class 9: a kforge.yaml key with a newline and `::error` in it: refused where the manifest is loaded, in one
    line that quotes it escaped."""
    root = one_kernel_repo(tmp_path / "repo")
    bad = entry("k").replace("  k:\n", '  "k\\n::error title=pwned::injected by a kernel name":\n', 1)
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("k") + bad.replace("file: k.py", "file: k.py"))
    commit_all(root, "head")
    proc = cli("gate", "--base", "HEAD~1", "--no-cache", cwd=root, env=actions_env(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()[-1:]
    assert "kernel name 'k\\n::error" in line and "not allowed" in line
    no_foreign_commands(proc.stdout, proc.stderr)


# --------------------------------------------------------------------------- 1: configuration from the head


@pytest.mark.slow
def test_the_heads_policy_file_is_not_read(tmp_path):
    """Class 1: the head sets `isolation: "off"` and a 99% threshold in the policy file the gate is pointed at, and
    its kernel, 20x slower, writes outside its sandbox when it can. The base's policy decides, the kernel runs
    sandboxed (it cannot write the marker) and the regression is caught."""
    root = one_kernel_repo(tmp_path / "repo", policy=POLICY)
    marker = tmp_path / "outside" / "pwned"
    marker.parent.mkdir()
    os.chmod(marker.parent, 0o777)  # writable by whoever runs the tests (kforge-ci too), were the kernel unsandboxed
    write(root, "policy.yml", POLICY.replace("threshold: 0.25", "threshold: 0.99") + 'isolation: "off"\n')
    write(root, "k.py", f"try:\n    open({str(marker)!r}, 'w').write('unsandboxed')\nexcept OSError:\n    pass\n"
          + PLAIN.replace("    return x * 2.0 + y", "    for _ in range(20):\n        out = x * 2.0 + y\n    return out"))
    commit_all(root, "head: a slower kernel, and a policy to let it through")
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", "--json", "-", "--no-cache", cwd=root,
               env=actions_env(tmp_path))
    assert not marker.exists(), "the head's kernel ran unsandboxed"
    report = json.loads(proc.stdout[proc.stdout.index("{"):proc.stdout.rindex("}") + 1])
    assert "(base " in report["policy"] and by_id(report)["k"]["threshold"] == 0.25
    assert by_id(report)["k"]["verdict"] == "regression", proc.stderr
    assert "isolation: OFF" not in proc.stderr


def test_a_policy_the_base_lacks_is_an_error(tmp_path):
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "README.md", "x\n")
    commit_all(root, "base")
    write(root, "policy.yml", 'isolation: "off"\n')
    commit_all(root, "head brings its own policy")
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", cwd=root)
    assert proc.returncode == 2 and "policy file policy.yml is not in the base commit" in proc.stderr


# --------------------------------------------------------------------------------------- 8: YAML aliases


def test_yaml_aliases_in_the_heads_manifest_are_refused(tmp_path):
    """Class 8: anchors and aliases (the 739-byte file that grew past 1.5 GB nested them): one line, nothing run."""
    root = one_kernel_repo(tmp_path / "repo")
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("k").replace("shapes: [{n: 128}]", "shapes: &s [{n: 128}]")
          + entry("k2", file="k.py").replace("shapes: [{n: 128}]", "shapes: *s"))
    commit_all(root, "head")
    proc = cli("gate", "--base", "HEAD~1", "--no-cache", cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("kforge-bot: error: kforge.yaml: not valid YAML")  # a repository path, not the runner's
    assert "anchors (&name, *name) are not allowed" in last and "Traceback" not in proc.stderr
