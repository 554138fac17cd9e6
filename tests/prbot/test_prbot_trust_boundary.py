"""The PR bot judges a pull request by the base's rules (issue 28): attacks a pull request can make, each on a real
repository with the loopback GitHub API, through `kforge-bot pr` as the action runs it under GitHub Actions.

1. configuration read from the head: the policy file the workflow names, edited by the PR;
2. the head writes its own test: a tolerance in kforge.yaml, a reference beside the kernel in its own file;
5. paths outside the checkout: a kernel file that is a symbolic link to a file outside;
8. YAML anchors and aliases in the head's kforge.yaml;
9. injection: a kernel name carrying a workflow command; an error quoting Markdown in the PR comment.
"""

from __future__ import annotations


import pytest
from fakes.gate_repos import PLAIN, REF
from fakes.github_server import FakeGitHub
from fakes.markdown import assert_nothing_live
from fakes.pr_repos import POLICY, POLICY_PATH, PullRequest

OFF_BY_HALF = PLAIN.replace("x * 2.0 + y", "x * 2.0 + y + 0.5")
# A kernel with its reference and inputs in its own file, as the README's examples have them.
WITH_REFERENCE = PLAIN + "\n\n" + REF.replace("import torch\n\n\n", "")


def manifest(*entries: str) -> str:
    return "version: 1\nkernels:\n" + "".join(entries)


def entry(name: str, *, file: str | None = None, reference: str = "ref.py:reference",
          inputs: str = "ref.py:make_inputs", extra: str = "") -> str:
    return (f"  {name}:\n    file: {file or name + '.py'}\n    entry: kernel\n    reference: {reference}\n"
            f"    inputs: {inputs}\n    shapes: [{{n: 64}}]\n    targets: [cpu]\n    language: torch\n{extra}")


BASE = {"ref.py": REF, "k.py": PLAIN, "kforge.yaml": manifest(entry("k"))}


def no_foreign_commands(*outputs: str) -> None:
    for text in outputs:
        for line in text.replace("\r", "\n").split("\n"):
            assert not line.lstrip().startswith("::") and "##[" not in line, f"a workflow command: {line!r}"


@pytest.fixture()
def fake():
    with FakeGitHub() as server:
        yield server
        assert server.schema_errors == []


# --------------------------------------------------------------------------- 1: configuration from the head


@pytest.mark.slow
@pytest.mark.parametrize("edit", ['isolation: "off"\n', 'kernel_paths: ["elsewhere/**"]\n'])
def test_the_heads_policy_file_is_not_read(tmp_path, fake, edit):
    """Class 1: the PR edits the policy file the workflow names (isolation off; kernel paths that hide its kernel)
    and its kernel writes outside its sandbox when it can. The base's policy decides: the kernel is found and runs
    sandboxed."""
    marker = tmp_path / "outside" / "pwned"
    marker.parent.mkdir()
    marker.parent.chmod(0o777)
    kernel = f"try:\n    open({str(marker)!r}, 'w').write('unsandboxed')\nexcept OSError:\n    pass\n" + PLAIN
    pr = PullRequest(tmp_path, fake, BASE, {"k.py": kernel, POLICY_PATH: POLICY + edit})
    proc = pr.run("--no-publish")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "k" in pr.kernels(), proc.stderr
    assert not marker.exists(), "the PR's kernel ran unsandboxed"
    assert "isolation: OFF" not in proc.stderr and "isolation: sandboxed" in proc.stderr


# --------------------------------------------------------------------------- 2: the head writes its own test


@pytest.mark.slow
@pytest.mark.parametrize("approved", [False, True])
def test_a_pr_cannot_loosen_its_own_test(tmp_path, fake, approved):
    """Class 2: `tol` goes wrong and loosens its tolerance in kforge.yaml; `same` goes wrong and edits the
    reference beside it in its own file. Both are judged under the base's test and get no follow-up PR, unless a
    maintainer's label approves the change."""
    base = {**BASE, "same.py": WITH_REFERENCE,
            "kforge.yaml": manifest(entry("k"), entry("same", reference="same.py:reference",
                                                      inputs="same.py:make_inputs"))}
    head = {"k.py": OFF_BY_HALF,
            "same.py": WITH_REFERENCE.replace("x * 2.0 + y", "x * 2.0 - y"),
            "kforge.yaml": manifest(entry("k", extra="    tolerance: {atol: 1.0, rtol: 1.0}\n"),
                                    entry("same", reference="same.py:reference", inputs="same.py:make_inputs"))}
    pr = PullRequest(tmp_path, fake, base, head)
    proc = pr.run(labels=("kforge:spec-change",) if approved else ())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kernels = pr.kernels()
    comment = pr.comment()
    for kid, part in (("k", "tolerance"), ("same", "reference")):
        outcome = kernels[kid]["outcome"]
        assert f"the PR edits this kernel's {part}" in outcome["spec_note"], outcome
        assert not kernels[kid]["qualifies"]
        if approved:  # judged by the PR's own test, which the wrong kernel passes
            assert "approved with the 'kforge:spec-change' label" in outcome["spec_note"]
            assert not outcome["spec_blocked"] and "incorrect" not in outcome["skip_reason"], outcome
        else:  # judged by the base's test, which the wrong kernel fails
            assert outcome["spec_blocked"] and outcome["skip_reason"].startswith("spec-changed: "), outcome
            assert "'kforge:spec-change' label" in outcome["skip_reason"] and "(incorrect" in outcome["skip_reason"]
            assert f"spec-changed: the PR edits this kernel's {part}" in comment
    assert [p for p in fake.pulls_of("octo/kernels") if p.head_ref.startswith("kforge/")] == []


# ------------------------------------------------------------------------------- 5: paths outside the checkout


def test_a_kernel_file_linked_outside_the_checkout_is_never_read(tmp_path, fake):
    """Class 5: the PR adds a kernel whose file is a committed symbolic link to a file outside the checkout (a
    runner's secret). It is an error naming the key, and the file's text appears nowhere."""
    secret = tmp_path / "outside" / "secret_kernel.py"
    secret.parent.mkdir()
    secret.write_text(PLAIN.replace("import torch", "import torch\n\nSECRET = 'canary-5d2e'"))
    pr = PullRequest(tmp_path, fake, BASE, {"kforge.yaml": manifest(entry("k"), entry("leak"))},
                     links={"leak.py": secret})
    proc = pr.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    leak = pr.kernels()["leak"]
    assert "kernels.leak.file: 'leak.py' resolves outside the checkout" in leak["outcome"]["skip_reason"], leak
    everything = proc.stdout + proc.stderr + pr.results.read_text() + pr.summary.read_text() + pr.comment()
    assert "canary-5d2e" not in everything


# ------------------------------------------------------------------------------------------ 8: YAML aliases


def test_yaml_aliases_in_the_heads_manifest_are_refused(tmp_path, fake):
    """Class 8: anchors and aliases in the PR's kforge.yaml: one line, exit 2, nothing run or published."""
    head = {"kforge.yaml": manifest(entry("k").replace("shapes: [{n: 64}]", "shapes: &s [{n: 64}]"),
                                    entry("k2", file="k.py").replace("shapes: [{n: 64}]", "shapes: *s"))}
    pr = PullRequest(tmp_path, fake, BASE, head)
    proc = pr.run()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("kforge-bot: error: kforge.yaml: not valid YAML") and "are not allowed" in last
    assert fake.comments_on("octo/kernels", pr.number) == []


# ---------------------------------------------------------------------------------------------- 9: injection


def test_a_kernel_name_cannot_write_a_workflow_command(tmp_path, fake):
    """Class 9: a kforge.yaml key with a newline and `::error`: refused where the manifest is loaded, in one line
    that shows it escaped; no line of the bot's output is a workflow command."""
    bad = entry("k").replace("  k:\n", '  "k\\n::error title=pwned::injected by a kernel name":\n', 1)
    pr = PullRequest(tmp_path, fake, BASE, {"kforge.yaml": manifest(entry("k"), bad)})
    proc = pr.run()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "kernel name 'k\\n::error" in proc.stderr.strip().splitlines()[-1]
    no_foreign_commands(proc.stdout, proc.stderr)


def test_an_error_quoting_markdown_renders_nothing_in_the_comment(tmp_path, fake):
    """Class 9: an `entry:` written as an image (and a mention) comes back in the kernel's error: the PR comment and
    the job summary show it as text, rendering no image, link or mention."""
    md = ("  md:\n    file: k.py\n    entry: '![x](https://evil.example/t.png) @octo/maintainers'\n"
          "    inputs: ref.py:make_inputs\n")
    pr = PullRequest(tmp_path, fake, BASE, {"kforge.yaml": manifest(entry("k"), md)})
    proc = pr.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for text in (pr.comment(), pr.summary.read_text()):
        assert "![x](https://evil.example/t.png)" in text
        assert_nothing_live(text, "![x]", "](https://evil", "@octo/maintainers")
    no_foreign_commands(proc.stdout, proc.stderr)
