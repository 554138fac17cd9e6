"""`kforge-bot pr` end to end: the real command in child processes, a real git repository with a bare
origin, the loopback GitHub API (responses checked against GitHub's OpenAPI description), the real
PyGithub client, real webhook payloads, and a real C kernel optimized by the built-in tuner on CPU.

The headline test runs the example workflow (.github/workflows/examples/kforge-pr.yml), copied into
the repository as the README says, through a small stand-in for the Actions runner (`Actions`): it
evaluates the workflow's `if:` and `${{ }}` expressions, runs action.yml's shell steps with bash,
and moves the results artifact from the per-target job to the publishing job.

The kernel checks its own environment for the GitHub token and fails if it sees it, so a follow-up
PR (which needs a correct baseline and candidate) proves the token never reached evaluated code.
Every run also asserts that the token is absent from everything it printed or wrote.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fakes.gate_repos import QUIET_MACHINE
from fakes.github_server import FakeGitHub
from fakes.gitrepos import action_checkout, commit_all, git, push_branches, write
from fakes.pr_repos import open_pull
from fakes.webhooks import as_fork, example, pr_comment

ROOT = Path(__file__).resolve().parents[2]
REPO = "octo/kernels"

MANIFEST = """\
version: 1
kernels:
  rmsnorm:
    file: kernels/rmsnorm.py
    entry: rmsnorm
    reference: kernels/rmsnorm.py:reference
    inputs: kernels/rmsnorm.py:make_inputs
    shapes:
      - {rows: 64, cols: 2048}
    targets: [cpu]
    language: c
    seeds: 1
"""

# CHUNK is the one tunable, and its first value does clearly redundant work: every chunk of CHUNK
# outputs recomputes its row's sum of squares, so 128 reads each row 17 times where 2048 (the whole
# row) reads it twice. The better value is several times faster on any machine, however loaded, so
# the follow-up PR does not hang on a close timing call.
KERNEL = '''\
"""RMS norm of each row, in C, built with the system compiler; {note}"""
import ctypes, hashlib, os, subprocess, tempfile
from pathlib import Path

import torch

# Evaluated code must never see the bot's credentials: fail loudly if it does.
_LEAKED = [k for k, v in os.environ.items() if "ghs_fake_token" in v or k == "GITHUB_TOKEN"]
if _LEAKED:
    raise RuntimeError(f"credentials visible to evaluated code: {{_LEAKED}}")

CHUNK = 128  # kforge: tune CHUNK in [128, 2048]
# On the scripted workers (tests/fakes/workers.py), a larger CHUNK pays off too:
# fake-worker: ms=1024 per=CHUNK

C_SOURCE = r"""
#include <math.h>
#define CHUNK %d
void rmsnorm(const float* x, const float* w, float* out, int M, int N) {{
    for (int i = 0; i < M; ++i) {{
        const float* row = x + (long)i * N;
        for (int j0 = 0; j0 < N; j0 += CHUNK) {{
            float ss = 0.0f;  /* the row's scale, recomputed for every chunk */
            for (int k = 0; k < N; ++k) ss += row[k] * row[k];
            float scale = 1.0f / sqrtf(ss / N + 1e-6f);
            int jn = (N - j0) < CHUNK ? (N - j0) : CHUNK;
            for (int j = 0; j < jn; ++j) out[(long)i * N + j0 + j] = row[j0 + j] * scale * w[j0 + j];
        }}
    }}
}}
""" % CHUNK


def _build():
    digest = hashlib.sha256(C_SOURCE.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"kforge-test-prbuild-{{os.getuid()}}"
    folder.mkdir(exist_ok=True)
    lib = folder / f"rmsnorm_{{digest}}.so"
    if not lib.exists():
        src = folder / f"rmsnorm_{{digest}}.c"
        src.write_text(C_SOURCE)
        tmp = lib.with_suffix(f".{{os.getpid()}}.tmp")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", str(src), "-o", str(tmp), "-lm"],
                       check=True, capture_output=True)
        tmp.replace(lib)
    handle = ctypes.CDLL(str(lib))
    handle.rmsnorm.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 2
    return handle


_LIB = _build()


def rmsnorm(x, w):
    x, w = x.contiguous(), w.contiguous()
    out = torch.empty_like(x)
    _LIB.rmsnorm(x.data_ptr(), w.data_ptr(), out.data_ptr(), x.shape[0], x.shape[1])
    return out


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * w


def make_inputs(rows, cols):
    return torch.randn(rows, cols), torch.rand(cols) + 0.5
'''

POLICY = """\
version: 1
min_speedup: {min_speedup}
budgets: {{iterations: 1, tokens: 1000, time_limit_s: 600}}
evaluation: {{seeds: 1, timing_budget_s: 1.0, timeout_s: 240}}
"""


# Fixed commit dates make every World's commits (and so their shas) identical, so results measured
# in one World are exactly what the optimize job would produce in another (see `measured`).
DATES = {"GIT_AUTHOR_DATE": "2026-11-29T12:00:00+00:00", "GIT_COMMITTER_DATE": "2026-11-29T12:00:00+00:00"}
WORKFLOW = ROOT / ".github" / "workflows" / "examples" / "kforge-pr.yml"
USER_WORKFLOW = ".github/workflows/kforge-pr.yml"
USER_POLICY = ".github/kforge-policy.yml"


def _load_yaml(text: str) -> dict:
    data = yaml.safe_load(text)
    if True in data:  # YAML 1.1 reads the key `on` as True
        data["on"] = data.pop(True)
    return data


def user_workflow() -> str:
    """The example workflow as a user with one CPU runner copies it: the matrix names their runner
    class (the example's are b200 and arc-b580) and the kforge steps name their policy. Nothing else
    changes."""
    wf = _load_yaml(WORKFLOW.read_text())
    from kforge_bot.hardware import get_runner

    rows = wf["jobs"]["optimize"]["strategy"]["matrix"]["include"]
    assert [r["target"] for r in rows] == ["b200", "arc-b580"], "the example's matrix changed: update this copy"
    wf["jobs"]["optimize"]["strategy"]["matrix"]["include"] = [
        {"target": "cpu", "runner": ["self-hosted", *[l for l in get_runner("cpu").labels if l != "self-hosted"]]}]
    for job in wf["jobs"].values():
        for step in job["steps"]:
            if step.get("id") == "kforge":
                step["with"]["policy"] = USER_POLICY
    return yaml.safe_dump(wf, sort_keys=False)


class World:
    """A repository `octo/kernels` with the kernel on main, a PR (#1, branch `feature`, by a
    collaborator) that changes it, the copied workflow and a policy, behind the loopback GitHub."""

    def __init__(self, tmp: Path, fake: FakeGitHub, *, min_speedup: float = 1.2, fake_workers: bool = False):
        self.tmp, self.fake = tmp, fake
        self.fake_workers = fake_workers  # every run on the scripted workers (tests/fakes/workers.py)
        base = {"kforge.yaml": MANIFEST, "kernels/rmsnorm.py": KERNEL.format(note="first version"),
                "README.md": "kernels\n", USER_WORKFLOW: user_workflow(),
                USER_POLICY: POLICY.format(min_speedup=min_speedup)}
        self.origin, self.seed, self.base_sha, self.head_sha = push_branches(
            tmp, base, {"kernels/rmsnorm.py": KERNEL.format(note="weights applied in the same pass")},
            messages=("initial", "rewrite rmsnorm"), env=DATES)
        # The Action's checkout: the PR head, origin pointing at the bare repository.
        self.work = action_checkout(tmp, self.origin, self.head_sha)
        self.number = open_pull(fake, self.origin, self.head_sha, title="Rewrite rmsnorm")
        self.outputs: list[str] = []  # everything any run printed or wrote, for the token check

    def _pull_ref(self) -> None:
        # GitHub keeps refs/pull/<n>/head on the base repository; comment-triggered checkouts use it.
        git(self.origin, "update-ref", f"refs/pull/{self.number}/head", self.head_sha)

    def push_to_feature(self, note: str) -> None:
        """The PR's author pushes a new commit (GitHub then sends `synchronize`)."""
        write(self.seed, "kernels/rmsnorm.py", KERNEL.format(note=note))
        self.head_sha = commit_all(self.seed, f"rmsnorm: {note}", env=DATES)
        git(self.seed, "push", "-q", "origin", "feature")
        self._pull_ref()

    def event(self, *, fork: bool = False, action: str = "opened") -> dict:
        payload = example("pull_request", action)
        if fork:
            as_fork(payload)
        payload["repository"]["full_name"] = REPO
        pr = payload["pull_request"]
        pr["number"] = payload["number"] = self.number
        pr["base"]["repo"]["full_name"] = REPO
        if not fork:
            pr["head"]["repo"]["full_name"] = REPO
            pr["user"]["login"], pr["author_association"] = "ada", "COLLABORATOR"
        pr["labels"] = []
        pr["base"].update(ref="main", sha=self.base_sha)
        pr["head"].update(ref="feature", sha=self.head_sha)
        return payload

    def comment(self, body: str, *, login: str = "ada", association: str = "COLLABORATOR") -> dict:
        payload = pr_comment(body, association=association, login=login)
        payload["repository"]["full_name"] = REPO
        payload["issue"]["number"] = self.number
        return payload

    def save(self, payload: dict, name: str) -> Path:
        path = self.tmp / f"event-{name}.json"
        path.write_text(json.dumps(payload))
        return path

    def run(self, event: dict | Path, *args: str, min_speedup: float = 1.2, event_name: str = "pull_request",
            timeout: float = 300, policy_extra: str = "") -> subprocess.CompletedProcess:
        """`kforge-bot pr` in the checkout, as the action's run step calls it."""
        if isinstance(event, dict):
            event = self.save(event, f"{event_name}-{len(self.outputs)}")
        policy = self.tmp / f"policy-{min_speedup}{'-extra' if policy_extra else ''}.yml"
        policy.write_text(POLICY.format(min_speedup=min_speedup) + policy_extra)
        self.summary = self.tmp / "summary.md"
        self.results = self.tmp / "results.json"
        env = {**os.environ, "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event),
               "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": self.fake.api_url, "GITHUB_TOKEN": self.fake.token,
               "GITHUB_WORKSPACE": str(self.work), "GITHUB_STEP_SUMMARY": str(self.summary),
               "PYTHONPATH": os.pathsep.join((str(QUIET_MACHINE), str(ROOT))), "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_TERMINAL_PROMPT": "0"}
        if self.fake_workers:
            env["KFORGE_TEST_FAKE_WORKERS"] = "1"  # tests/fakes/quiet_machine/sitecustomize.py
        for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "KFORGE_MODEL", "KFORGE_POLICY"):
            env.pop(key, None)  # the built-in tuner, and only the policy given here
        cmd = [sys.executable, "-m", "kforge_bot.cli", "pr", "--policy", str(policy), "--json", str(self.results),
               "--target", "cpu", "--work-dir", str(self.tmp / "trajectories"), *args]
        proc = subprocess.run(cmd, cwd=self.work, env=env, capture_output=True, text=True, timeout=timeout)
        self.outputs += [proc.stdout, proc.stderr]
        for path in (self.summary, self.results):
            if path.exists():
                self.outputs.append(path.read_text())
        self.assert_no_token()
        return proc

    def assert_no_token(self) -> None:
        leaked = [text[:200] for text in self.outputs if self.fake.token in text]
        assert not leaked, f"the GitHub token appeared in output: {leaked}"

    def follow_ups(self):
        return [p for p in self.fake.pulls_of(REPO) if p.head_ref.startswith("kforge/")]


# -- a stand-in for the Actions runner ------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!(),])"
                    r"|(?P<name>[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*))")


class Expr:
    """GitHub Actions expressions (the subset the example workflow and action.yml use): literals,
    context paths, ! == != && || and parentheses, contains / startsWith / fromJSON / format and the
    status functions. Semantics as documented: || and && return an operand, string comparison
    ignores case, a missing property is null."""

    def __init__(self, contexts: dict[str, Any], *, job_status: str = "success"):
        self.contexts, self.job_status = contexts, job_status

    def evaluate(self, text: str) -> Any:
        text = text.strip()
        if text.startswith("${{") and text.endswith("}}") and text.count("${{") == 1:
            text = text[3:-2]
        self.tokens = self._lex(text)
        self.i = 0
        value = self._or()
        assert self.i == len(self.tokens), f"unparsed expression tail in {text!r}: {self.tokens[self.i:]}"
        return value

    def render(self, text: Any) -> str:
        """A string with ${{ }} parts, as the runner substitutes them."""
        def one(m: re.Match) -> str:
            return self.string(Expr(self.contexts, job_status=self.job_status).evaluate(m.group(1)))
        return re.sub(r"\$\{\{(.*?)\}\}", one, str(text), flags=re.S)

    @staticmethod
    def string(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (dict, list)):
            return json.dumps(value)
        return str(value)

    @staticmethod
    def truthy(value: Any) -> bool:
        return value not in (None, False, 0, "")

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            assert m and m.end() > pos, f"cannot read the expression at {text[pos:pos + 30]!r}"
            kind = m.lastgroup
            out.append((kind, m.group(kind)))
            pos = m.end()
        return out

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, op: str | None = None) -> tuple[str, str]:
        tok = self._peek()
        assert tok is not None and (op is None or tok == ("op", op)), f"expected {op} at {tok}"
        self.i += 1
        return tok

    def _or(self) -> Any:
        value = self._and()
        while self._peek() == ("op", "||"):
            self._take()
            right = self._and()
            value = value if self.truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._cmp()
        while self._peek() == ("op", "&&"):
            self._take()
            right = self._cmp()
            value = right if self.truthy(value) else value
        return value

    def _cmp(self) -> Any:
        value = self._unary()
        tok = self._peek()
        if tok in (("op", "=="), ("op", "!=")):
            self._take()
            right = self._unary()
            same = self._eq(value, right)
            return same if tok[1] == "==" else not same
        return value

    @staticmethod
    def _eq(a: Any, b: Any) -> bool:
        if isinstance(a, str) and isinstance(b, str):
            return a.lower() == b.lower()
        return a == b

    def _unary(self) -> Any:
        if self._peek() == ("op", "!"):
            self._take()
            return not self.truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if (kind, text) == ("op", "("):
            value = self._or()
            self._take(")")
            return value
        assert kind == "name", f"unexpected {text!r}"
        if self._peek() == ("op", "("):
            self._take()
            args = []
            while self._peek() != ("op", ")"):
                args.append(self._or())
                if self._peek() == ("op", ","):
                    self._take()
            self._take(")")
            return self._call(text, args)
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        value: Any = self.contexts
        for part in text.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def _call(self, name: str, args: list[Any]) -> Any:
        if name == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(self._eq(x, needle) for x in hay)
            return self.string(needle).lower() in self.string(hay).lower()
        if name == "startsWith":
            return self.string(args[0]).lower().startswith(self.string(args[1]).lower())
        if name == "fromJSON":
            return json.loads(args[0])
        if name == "format":
            return re.sub(r"\{(\d+)\}", lambda m: self.string(args[1 + int(m.group(1))]), args[0])
        if name == "always":
            return True
        if name == "cancelled":
            return False
        if name == "success":
            return self.job_status == "success"
        if name == "failure":
            return self.job_status == "failure"
        raise AssertionError(f"expression function {name}() is not supported by this stand-in")


class Actions:
    """Runs the copied workflow's jobs for one event, the way GitHub's runner would, on this machine.

    Steps by `uses`: actions/checkout (a clone of origin at `ref`, default the base branch, as for
    pull_request_target and issue_comment), the kforge action (action.yml's shell steps under bash
    with its inputs through env, exactly as written; only its pip-install step is left out: the
    package comes from PYTHONPATH), actions/setup-python (the test's Python),
    upload-/download-artifact (a folder per artifact). Anything else fails the test."""

    def __init__(self, world: World):
        self.world = world
        self.runs = 0

    def workflow(self) -> dict:
        # pull_request_target and issue_comment runs take the workflow from the default branch.
        return _load_yaml(git(self.world.origin, "show", f"main:{USER_WORKFLOW}"))

    def trigger(self, event_name: str, payload: dict, *, optimize_results: Path | None = None) -> dict[str, Any]:
        """Run every job; returns {job: {"ran": bool, "result": ..., "steps": [...], "outputs": {...}}}.

        optimize_results: stand in for the per-target optimize job with a results file it produced
        earlier for the same commit (only where the job's `if:` says it runs)."""
        self.runs += 1
        w = self.world
        base = w.tmp / f"actions-run-{self.runs}"
        self.artifacts = base / "artifacts"
        self.artifacts.mkdir(parents=True)
        event_path = base / "event.json"
        event_path.write_text(json.dumps(payload))
        wf = self.workflow()
        assert event_name in wf["on"], f"the workflow does not run on {event_name}"
        github = {"event_name": event_name, "event": payload, "repository": REPO, "token": w.fake.token,
                  "run_id": str(4000 + self.runs), "workflow": wf.get("name"), "server_url": "https://github.example",
                  "api_url": w.fake.api_url}
        inputs = payload.get("inputs") or {}
        results: dict[str, Any] = {}
        for job_id, job in wf["jobs"].items():
            needs = job.get("needs") or []
            needs = [needs] if isinstance(needs, str) else needs
            upstream = [results[n]["result"] for n in needs]
            status = "failure" if "failure" in upstream else "success"
            condition = job.get("if")
            ctx = {"github": github, "inputs": inputs, "env": dict(wf.get("env") or {}), "secrets": {},
                   "needs": {n: {"result": results[n]["result"], "outputs": results[n]["outputs"]} for n in needs}}
            explicit = condition is not None and re.search(r"\b(always|cancelled|failure|success)\(", str(condition))
            runs = Expr(ctx, job_status=status).truthy(Expr(ctx, job_status=status).evaluate(str(condition))) \
                if condition is not None else True
            if not explicit and any(r != "success" for r in upstream):
                runs = False
            if not runs:
                results[job_id] = {"ran": False, "result": "skipped", "steps": [], "outputs": {}}
                continue
            rows = (job.get("strategy") or {}).get("matrix", {}).get("include") or [{}]
            job_result = {"ran": True, "result": "success", "steps": [], "outputs": {}}
            for row in rows:
                if optimize_results is not None and job_id == "optimize":
                    dest = self.artifacts / f"kforge-results-{row['target']}"
                    dest.mkdir()
                    shutil.copy(optimize_results, dest / "results.json")
                    job_result["steps"].append({"name": "(replayed results)", "rc": 0, "out": ""})
                    continue
                self._run_job(job_id, job, row, {**ctx, "matrix": row}, base, job_result)
            results[job_id] = job_result
        return results

    def _run_job(self, job_id: str, job: dict, row: dict, ctx: dict, base: Path, job_result: dict) -> None:
        w = self.world
        tag = f"{job_id}-{row.get('target', 'job')}"
        workspace = base / tag / "workspace"
        temp = base / tag / "temp"
        temp.mkdir(parents=True)
        summary = base / tag / "summary.md"
        ctx = {**ctx, "steps": {}, "runner": {"temp": str(temp)}}
        git(base, "clone", "-q", str(w.origin), str(workspace))
        # actions/setup-python puts its Python first on PATH: here the test's own (its venv, activated or not)
        path = os.pathsep.join((str(Path(sys.executable).parent), os.environ["PATH"]))
        env_base = {"PATH": path, "HOME": str(base / tag), "LANG": "C.UTF-8",
                    "PYTHONPATH": os.pathsep.join((str(QUIET_MACHINE), str(ROOT))), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_TERMINAL_PROMPT": "0",
                    "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": ctx["github"]["event_name"],
                    "GITHUB_EVENT_PATH": str(base / "event.json"), "GITHUB_REPOSITORY": REPO,
                    "GITHUB_API_URL": w.fake.api_url, "GITHUB_SERVER_URL": ctx["github"]["server_url"],
                    "GITHUB_RUN_ID": ctx["github"]["run_id"], "GITHUB_WORKSPACE": str(workspace),
                    "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(temp)}
        for step in job["steps"]:
            expr = Expr(ctx, job_status=job_result["result"])
            cond = step.get("if")
            if cond is not None and not expr.truthy(expr.evaluate(str(cond))):
                continue
            if cond is None and job_result["result"] != "success":
                continue
            uses = step.get("uses", "")
            with_ = {k: expr.render(v) for k, v in (step.get("with") or {}).items()}
            rc, out, outputs = 0, "", {}
            if uses.startswith("actions/checkout@"):
                ref = with_.get("ref") or "main"
                if re.fullmatch(r"[0-9a-f]{40}", ref) or ref == "main":
                    git(workspace, "checkout", "-q", "--detach", ref)
                else:
                    git(workspace, "fetch", "-q", "origin", ref)
                    git(workspace, "checkout", "-q", "--detach", "FETCH_HEAD")
                assert with_.get("fetch-depth") == "0", "diffing base and head needs the full history"
            elif uses.startswith("actions/setup-python@"):
                pass
            elif uses.startswith("kforge-bot/kforge-bot@"):
                rc, out, outputs = self._run_action(with_, ctx, env_base, workspace, base / tag)
            elif uses.startswith("actions/upload-artifact@"):
                source = Path(with_["path"])
                assert source.exists(), f"upload-artifact: {source} does not exist"
                dest = self.artifacts / with_["name"]
                dest.mkdir()
                if source.is_dir():  # a folder uploads its contents
                    shutil.copytree(source, dest, dirs_exist_ok=True)
                else:
                    shutil.copy(source, dest / source.name)
                number = len(list(self.artifacts.iterdir()))  # upload-artifact@v4's documented outputs
                outputs = {"artifact-id": str(number), "artifact-url": f"{ctx['github']['server_url']}/{REPO}/actions/"
                                                                      f"runs/{ctx['github']['run_id']}/artifacts/{number}"}
            elif "run" in step:  # a workflow's own shell step: bash with its env, as the runner runs it
                script = base / tag / f"workflow-step-{len(job_result['steps'])}.sh"
                script.write_text(step["run"])
                env = {**env_base, **{k: expr.render(v) for k, v in (step.get("env") or {}).items()}}
                proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                                      env=env, capture_output=True, text=True, timeout=60)
                rc, out = proc.returncode, proc.stdout + proc.stderr
            elif uses.startswith("actions/download-artifact@"):
                target = workspace / with_["path"]
                for art in sorted(self.artifacts.iterdir()):
                    if fnmatch.fnmatch(art.name, with_["pattern"]):
                        shutil.copytree(art, target / art.name)
            else:
                raise AssertionError(f"this stand-in does not know the step {step}")
            if step.get("id"):
                ctx["steps"][step["id"]] = {"outputs": outputs, "outcome": "success" if rc == 0 else "failure"}
            job_result["steps"].append({"name": step.get("name") or uses, "rc": rc, "out": out})
            w.outputs.append(out)
            if rc != 0:
                job_result["result"] = "failure"
        if summary.exists():
            w.outputs.append(summary.read_text())
            job_result["summary"] = summary.read_text()
        for name, value in (job.get("outputs") or {}).items():
            job_result["outputs"][name] = Expr(ctx).render(value)
        w.assert_no_token()

    def _run_action(self, with_: dict, ctx: dict, env_base: dict, workspace: Path, folder: Path):
        action = _load_yaml((ROOT / "action.yml").read_text())
        unknown = set(with_) - set(action["inputs"])
        assert not unknown, f"the workflow passes inputs action.yml does not declare: {unknown}"
        actx = {**ctx, "inputs": {}}
        for name, spec in action["inputs"].items():
            actx["inputs"][name] = with_[name] if name in with_ else Expr(actx).render(spec.get("default", ""))
        actx["steps"] = {}
        out_text, rc = "", 0
        for i, step in enumerate(action["runs"]["steps"]):
            if step["name"] == "Install kforge-bot":
                continue  # pip install of this checkout; PYTHONPATH provides the package instead
            cond = step.get("if")
            expr = Expr(actx, job_status="success" if rc == 0 else "failure")
            if (cond is None and rc != 0) or (cond is not None and not expr.truthy(expr.evaluate(cond))):
                continue
            output_file = folder / f"output-{i}"
            output_file.touch()
            script = folder / f"action-step-{i}.sh"
            script.write_text(step["run"])
            env = {**env_base, "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_OUTPUT": str(output_file)}
            env.update({k: expr.render(v) for k, v in (step.get("env") or {}).items()})
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                                  env=env, capture_output=True, text=True, timeout=400)
            out_text += proc.stdout + proc.stderr
            rc = rc or proc.returncode
            outs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
            self.world.outputs.append(output_file.read_text())
            if step.get("id"):
                actx["steps"][step["id"]] = {"outputs": outs}
        outputs = {name: Expr(actx).render(spec["value"]) for name, spec in action["outputs"].items()}
        return rc, out_text, outputs


@pytest.fixture()
def world(tmp_path):
    with FakeGitHub() as fake:
        yield World(tmp_path, fake)
        assert fake.schema_errors == [], "the fake sent responses that violate GitHub's OpenAPI description"


def measure(tmp: Path, fake_workers: bool = False) -> Path:
    """The optimize job's results file for PR #1's head: the real tuner on the real kernel, `kforge-bot pr
    --no-publish`, exactly as the per-target job runs it (`fake_workers`: its evaluations on scripted workers).
    Worlds have identical commits, so the publishing tests aggregate it as the workflow's publish job would."""
    with FakeGitHub() as fake:
        w = World(tmp, fake, fake_workers=fake_workers)
        proc = w.run(w.event(), "--no-publish", event_name="pull_request_target")
        _ok(proc)
        assert [r.method for r in fake.writes()] == [], "--no-publish wrote to GitHub"
        data = json.loads(w.results.read_text())
        assert data["kernels"][0]["qualifies"] is True, proc.stderr
        assert data["head_sha"] == w.head_sha
        # Nothing the run wrote (trajectories, candidates, results) holds the token.
        for path in tmp.rglob("*"):
            if path.is_file() and ".git" not in path.parts and "origin.git" not in path.parts:
                assert fake.token.encode() not in path.read_bytes(), f"the token is in {path}"
    return w.results


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Measured once for the module on real workers (about 30 s), for the headline test."""
    return measure(tmp_path_factory.mktemp("measured"))


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """Measured on scripted workers: what the publishing tests read (the bot's own logic), in the fast lane."""
    return measure(tmp_path_factory.mktemp("scripted"), fake_workers=True)


def _ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def _artifacts(world: World, results: Path) -> Path:
    folder = world.tmp / "kforge-results"
    (folder / "kforge-results-cpu").mkdir(parents=True, exist_ok=True)
    shutil.copy(results, folder / "kforge-results-cpu" / "results.json")
    return folder


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = [l for l in proc.stderr.strip().splitlines() if not l.startswith("kforge pr: ")]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _assert_large_gain(body: str) -> None:
    row = re.search(r"^\| cpu[^|]*\| ([\d.]+ [mu]s) \| ([\d.]+ [mu]s) \| ([\d.]+)x \(([\d.]+)-([\d.]+)\) \|", body, re.M)
    assert row, body
    speedup, low, high = map(float, row.group(3, 4, 5))
    print(f"measured: {row.group(0)}")
    assert 2.0 <= low <= speedup <= high, row.group(0)  # the fixture's gain is large, not noise


# -- the done-when: the example workflow, copied, on a PR that changes the kernel ---------------------

@pytest.mark.slow
def test_pr_opens_one_follow_up_then_updates_it(world, measured):
    actions = Actions(world)
    # The first run's optimize job is the module's measured run of this very commit (the same
    # command on the same checkout); the second run below executes its optimize job for real.
    jobs = actions.trigger("pull_request_target", world.event(), optimize_results=measured)
    assert [jobs[j]["ran"] for j in ("optimize", "publish")] == [True, True]
    assert all(s["rc"] == 0 for j in jobs.values() for s in j["steps"]), jobs
    ups = world.follow_ups()
    assert len(ups) == 1, jobs
    pr = ups[0]
    assert jobs["publish"]["outputs"]["pr-numbers"] == str(pr.number)
    assert pr.base_ref == "feature" and pr.head_ref == f"kforge/pr-{world.number}/rmsnorm"
    assert pr.title.startswith("kforge: rmsnorm ") and "faster on cpu" in pr.title
    # The evidence: the table row with times and a CI, correctness, profile, how found, reproduce, diff.
    _assert_large_gain(pr.body)
    for section in ("<summary>Correctness</summary>", "- Seeds: ", "- Shape sets: ", "- Tolerance: ",
                    "- Largest absolute error: ", "<summary>Profile: before and after</summary>",
                    "<summary>How it was found</summary>", "built-in tuner", "<summary>Reproduce</summary>",
                    "kforge-bot check kernels/rmsnorm.py", "<summary>Diff</summary>", "-CHUNK = 128 ",
                    "+CHUNK = 2048 "):
        assert section in pr.body, section
    # The branch holds the PR head plus one bot commit with the candidate.
    assert world.fake._git(REPO, "rev-parse", f"{pr.head_ref}~1") == world.head_sha
    assert "CHUNK = 2048 " in world.fake._git(REPO, "show", f"{pr.head_ref}:kernels/rmsnorm.py")
    [comment] = world.fake.comments_on(REPO, world.number)
    assert f"[#{pr.number}]" in comment.body and comment.user == world.fake.bot_login
    assert world.fake.statuses[-1]["state"] == "success" and world.fake.statuses[-1]["sha"] == world.head_sha
    assert f"#{pr.number}" in jobs["publish"]["summary"]

    # The author pushes again: the new run re-measures the new head and updates the same PR and comment.
    first_body, first_comment = pr.body, comment.body
    world.push_to_feature("a comment about the scale")
    jobs2 = actions.trigger("pull_request_target", world.event(action="synchronize"))
    assert [s["name"] for s in jobs2["optimize"]["steps"]][:2] == ["actions/checkout@v4", "kforge-bot/kforge-bot@main"]
    assert all(s["rc"] == 0 for j in jobs2.values() for s in j["steps"]), jobs2
    # The optimize job's summary lists the kernel and its report folder, and links the uploaded reports
    # (report.md, trajectory, candidates: the run's raw files, counters where the runner has a profiler).
    optimize_summary = jobs2["optimize"]["summary"]
    assert "### kforge-bot" in optimize_summary and "| rmsnorm | cpu |" in optimize_summary, optimize_summary
    assert "Run reports and hardware counters: [kforge-reports](http" in optimize_summary
    reports = actions.artifacts / "kforge-reports-cpu"
    assert list(reports.glob("*/report.md")) and list(reports.glob("*/trajectory.jsonl")), sorted(reports.rglob("*"))
    assert [p.number for p in world.follow_ups()] == [pr.number]
    assert jobs2["publish"]["outputs"]["pr-numbers"] == str(pr.number)
    assert world.fake._git(REPO, "rev-parse", f"{pr.head_ref}~1") == world.head_sha  # rebuilt on the new head
    [comment2] = world.fake.comments_on(REPO, world.number)
    assert comment2.id == comment.id  # edited in place
    assert sum(1 for r in world.fake.writes() if r.method == "POST" and r.template == "/repos/{owner}/{repo}/pulls") == 1
    assert sum(1 for r in world.fake.writes()
               if r.method == "POST" and r.template == "/repos/{owner}/{repo}/issues/{issue_number}/comments") == 1
    assert any(r.method == "PATCH" and r.template == "/repos/{owner}/{repo}/pulls/{pull_number}"
               for r in world.fake.writes())
    _assert_large_gain(pr.body)  # measured again, on the new head
    assert "a comment about the scale" in world.fake._git(REPO, "show", f"{pr.head_ref}:kernels/rmsnorm.py")
    assert world.fake.statuses[-1]["sha"] == world.head_sha
    assert (pr.body, comment2.body) != (first_body, first_comment) or "updated" in jobs2["publish"]["steps"][-1]["out"]


# -- publishing, from the optimize job's results (the workflow's publish job) ----------------------

def test_human_push_to_the_bot_branch_stops_updates(world, scripted):
    results = _artifacts(world, scripted)
    _ok(world.run(world.event(), "--aggregate", str(results), event_name="pull_request_target"))
    [pr] = world.follow_ups()
    body = pr.body
    human = world.tmp / "human"
    git(world.tmp, "clone", "-q", "-b", pr.head_ref, str(world.origin), str(human))
    write(human, "kernels/rmsnorm.py", KERNEL.format(note="hand-tuned").replace("CHUNK = 128 ", "CHUNK = 1024 "))
    hand = commit_all(human, "hand tuning on top of the bot")
    git(human, "push", "-q", "origin", pr.head_ref)

    proc = world.run(world.event(action="synchronize"), "--aggregate", str(results), event_name="pull_request_target")
    _ok(proc)
    assert "someone else pushed to kforge/pr-1/rmsnorm; kforge-bot no longer updates it" in proc.stdout
    assert world.fake.branch_sha(REPO, pr.head_ref) == hand  # not force-pushed over
    assert pr.body == body and [p.number for p in world.follow_ups()] == [pr.number]
    [comment] = world.fake.comments_on(REPO, world.number)
    assert "no longer updates it" in comment.body


def test_below_min_speedup_opens_nothing_and_says_so(world, scripted):
    proc = world.run(world.event(), "--aggregate", str(_artifacts(world, scripted)), min_speedup=50,
                     event_name="pull_request_target")
    _ok(proc)
    assert world.follow_ups() == [] and world.fake.branch_sha(REPO, "kforge/pr-1/rmsnorm") is None
    [comment] = world.fake.comments_on(REPO, world.number)
    assert "no follow-up PR" in comment.body and "min_speedup 50" in comment.body
    assert "no follow-up PR" in proc.stdout
    assert world.fake.statuses[-1]["state"] == "success"


@pytest.mark.slow
def test_no_improvement_comments_and_opens_nothing(world):
    # One process does it all here (publish: "true", no aggregation), with the real tuner.
    proc = world.run(world.event(), min_speedup=50)
    _ok(proc)
    assert world.follow_ups() == []
    assert world.fake.branch_sha(REPO, f"kforge/pr-{world.number}/rmsnorm") is None
    body = world.fake.comments_on(REPO, world.number)[0].body
    # Either the loop found nothing faster, or what it found is below the policy's 50x: no PR both ways.
    assert "no follow-up PR: `no improvement" in body  # the reason, as text in a code span
    assert "no follow-up PR" in proc.stdout


def test_a_kernel_in_a_language_the_policy_refuses_is_skipped_with_the_reason(world):
    """Policy `languages: [triton, cuda]` and a kernel declared `language: c`: nothing runs for it, and the
    comment and the results say why."""
    proc = world.run(world.event(), policy_extra="languages: [triton, cuda]\n")
    _ok(proc)
    assert world.follow_ups() == []
    results = json.loads(world.results.read_text())
    run = next(k for k in results["kernels"] if k["kernel"] == "rmsnorm")
    assert "written in c; the policy allows candidates only in triton, cuda" in json.dumps(run)
    assert "kforge pr: rmsnorm: optimizing" not in proc.stderr  # the loop never started


# -- API errors: one line each, the token nowhere -------------------------------------------------

def test_403_on_opening_the_pr_is_one_line_with_the_fix(world, scripted):
    world.fake.inject("POST", "/repos/{owner}/{repo}/pulls", 403, "Resource not accessible by integration")
    proc = world.run(world.event(), "--aggregate", str(_artifacts(world, scripted)), event_name="pull_request_target")
    _one_line_error(proc, "permission denied while opening the pull request kforge/pr-1/rmsnorm -> feature",
                    "403 Resource not accessible by integration", "pull-requests: write")
    assert world.follow_ups() == []


def test_422_on_opening_the_pr_is_one_line(world, scripted):
    world.fake.inject("POST", "/repos/{owner}/{repo}/pulls", 422, "Validation Failed",
                      errors=[{"resource": "PullRequest", "field": "base", "code": "invalid"}])
    proc = world.run(world.event(), "--aggregate", str(_artifacts(world, scripted)), event_name="pull_request_target")
    _one_line_error(proc, "GitHub rejected the request while opening the pull request", "422 Validation Failed",
                    "base invalid")


def test_primary_rate_limit_is_one_line_with_the_reset_time(world):
    world.fake.inject_rate_limit("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission")
    proc = world.run(world.event(), event_name="pull_request_target", timeout=120)
    _one_line_error(proc, "rate limit exceeded while reading the permission of @ada", "API rate limit exceeded",
                    "resets at")
    assert world.fake.writes() == [] and not (world.tmp / "trajectories").exists()


def test_secondary_rate_limit_429_is_one_line(world):
    world.fake.inject_secondary_rate_limit("POST", "/repos/{owner}/{repo}/statuses/{sha}", retry_after=0, times=10)
    proc = world.run(world.event(), event_name="pull_request_target", timeout=120)
    _one_line_error(proc, "rate limit exceeded while setting the kforge-bot status")
    assert not (world.tmp / "trajectories").exists()  # nothing measured after the failure


# -- comment commands, through the workflow ---------------------------------------------------------

def test_optimize_command_from_a_collaborator_runs(world, scripted):
    actions = Actions(world)
    jobs = actions.trigger("issue_comment", world.comment("/kforge optimize"), optimize_results=scripted)
    assert jobs["optimize"]["ran"] and jobs["publish"]["ran"], jobs
    out = jobs["publish"]["steps"][-1]["out"]
    assert "run: same-repository PR by @ada" in out, out
    [pr] = world.follow_ups()
    assert pr.base_ref == "feature" and jobs["publish"]["outputs"]["pr-numbers"] == str(pr.number)
    # The command was checked against the API too: the commenter's permission was read.
    assert any(r.template == "/repos/{owner}/{repo}/collaborators/{username}/permission" for r in world.fake.requests)


def test_optimize_command_from_others_runs_nothing(world):
    world.fake.add_user("eve")
    actions = Actions(world)
    jobs = actions.trigger("issue_comment", world.comment("/kforge optimize", login="eve", association="NONE"))
    assert not jobs["optimize"]["ran"]  # no self-hosted job at all
    out = jobs["publish"]["steps"][-1]["out"]
    assert "skipped: /kforge optimize by @eve (NONE) ignored" in out, out
    assert world.fake.writes() == [] and world.follow_ups() == []
    # A COLLABORATOR association whose write access is gone (read permission) is not trusted either;
    # the workflow's `if:` lets it through to the job, where kforge-bot checks the API and refuses.
    world.fake.set_permission(REPO, "eve", "read")
    proc = world.run(world.comment("/kforge optimize", login="eve", association="COLLABORATOR"),
                     event_name="issue_comment")
    _ok(proc)
    assert "skipped: /kforge optimize by @eve (COLLABORATOR, read permission) ignored" in proc.stdout
    assert world.fake.writes() == [] and not (world.tmp / "trajectories").exists()


def test_stop_command_closes_the_follow_up(world, scripted):
    _ok(world.run(world.event(), "--aggregate", str(_artifacts(world, scripted)), event_name="pull_request_target"))
    [pr] = world.follow_ups()
    actions = Actions(world)
    jobs = actions.trigger("issue_comment", world.comment("/kforge stop", login="eve", association="NONE"))
    assert not jobs["optimize"]["ran"] and pr.state == "open"  # a stranger cannot stop it
    jobs = actions.trigger("issue_comment", world.comment("/kforge stop"))
    assert not jobs["optimize"]["ran"], "stop must not start self-hosted work"
    assert "/kforge stop: closed #" in jobs["publish"]["steps"][-1]["out"]
    assert pr.state == "closed" and "Closed by `/kforge stop` from @ada" in world.fake.comments_on(REPO, pr.number)[0].body
    assert world.fake.branch_sha(REPO, pr.head_ref) is not None  # the branch stays


def test_workflow_dispatch_with_a_pr_number_runs(world, scripted):
    payload = example("workflow_dispatch")
    payload["inputs"] = {"pr": str(world.number)}
    payload["repository"]["full_name"] = REPO
    jobs = Actions(world).trigger("workflow_dispatch", payload, optimize_results=scripted)
    assert jobs["optimize"]["ran"] and jobs["publish"]["ran"]
    [pr] = world.follow_ups()
    assert jobs["publish"]["outputs"]["pr-numbers"] == str(pr.number) and pr.base_ref == "feature"


def test_fork_without_label_runs_nothing(world):
    proc = world.run(world.event(fork=True), event_name="pull_request_target")
    _ok(proc)
    assert "skipped: fork PR from mallory/" in proc.stdout and "'kforge:run' label" in proc.stdout
    assert world.fake.writes() == []
    assert not (world.tmp / "trajectories").exists()  # nothing was evaluated
    assert "not run: fork PR" in world.summary.read_text()
    assert json.loads(world.results.read_text())["allowed"] is False
    jobs = Actions(world).trigger("pull_request_target", world.event(fork=True))
    assert not jobs["optimize"]["ran"] and "skipped: fork PR" in jobs["publish"]["steps"][-1]["out"]


def test_malformed_event_exits_2_with_one_line(world):
    bad = world.tmp / "bad.json"
    bad.write_text('{"action": "opened", "repository": {"full_name": "octo/kernels"}}')
    proc = world.run(bad)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "event payload has no pull_request" in lines[0] and str(bad) in lines[0]
    notjson = world.tmp / "notjson.json"
    notjson.write_text("{oops")
    proc = world.run(notjson)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert world.fake.writes() == []


def test_expression_stand_in_follows_githubs_rules():
    e = Expr({"github": {"event": {"a": "X", "n": 0}}, "matrix": {"t": "cpu"}})
    assert e.evaluate("github.event.a == 'x'") is True  # case-insensitive strings
    assert e.evaluate("github.event.missing || 'd'") == "d" and e.evaluate("github.event.n || 5") == 5
    assert e.evaluate("github.event.a && 'y'") == "y" and e.evaluate("!github.event.a") is False
    assert e.evaluate("contains(fromJSON('[\"OWNER\", \"MEMBER\"]'), 'member')") is True
    assert e.evaluate("startsWith('/kforge stop', '/kforge')") and not e.evaluate("startsWith('x', '/kforge')")
    assert e.evaluate("format('refs/pull/{0}/head', 7)") == "refs/pull/7/head"
    assert e.render("a-${{ matrix.t }}-${{ github.event.missing }}") == "a-cpu-"


def test_a_kernel_whose_header_alone_changed_is_a_changed_kernel(tmp_path: Path) -> None:
    """Attack (issue 28, class 3), the PR bot's path: only the header a kernel's C++ includes changes."""
    from fakes.gate_repos import REF, manifest

    from kforge_bot.prbot.pull_request import changed_kernels
    from kforge_bot.config.policy import load_policy

    kernel = ('from torch.utils.cpp_extension import load\n\n\ndef kernel(x, y):\n'
              '    return load(name="k", sources=["k.cpp"], extra_include_paths=["include"]).run(x) + y\n')
    roots = {}
    for side, factor in (("base", "2"), ("head", "3")):
        root = roots[side] = tmp_path / side
        write(root, "ref.py", REF)
        write(root, "built.py", kernel)
        write(root, "k.cpp", '#include "scale.h"\n')
        write(root, "include/scale.h", f"#define FACTOR {factor}\n")
        write(root, "kforge.yaml", manifest(["built"]))
    found = changed_kernels(tmp_path, "base", "head", load_policy(None), roots["head"], roots["base"], [])
    assert [k.name for k, _old, _fork in found] == ["built"]


def test_the_pr_bot_holds_a_kernel_to_mains_tip_and_names_only_the_prs_own_edits(tmp_path: Path) -> None:
    """Main tightened `k`'s tolerance after the PR branched: the bot optimizes under main's (the tip's) test, and
    the tolerance the head still has from its branch point is not the PR's edit (no spec-changed block)."""
    from fakes.gate_repos import PLAIN, REF, entry

    from kforge_bot.prbot.pull_request import judged
    from kforge_bot.config.policy import load_policy
    from kforge_bot.kernelspec.kernels import discover

    policy = load_policy(None)
    loose = "version: 1\nkernels:\n" + entry("k", extra="    tolerance: {atol: 0.1, rtol: 0.1}\n")
    tight = "version: 1\nkernels:\n" + entry("k")
    found = {}
    for side, text in (("fork", loose), ("tip", tight), ("head", loose)):
        write(tmp_path / side, "ref.py", REF)
        write(tmp_path / side, "k.py", PLAIN)
        write(tmp_path / side, "kforge.yaml", text)
        found[side] = discover(tmp_path / side, policy)["k"]
    spec, note, blocked = judged(found["head"], found["tip"], policy, (), found["fork"])
    assert spec.tolerance is None and note is None and not blocked
    _, note, blocked = judged(found["head"], found["tip"], policy, ())  # the same head, its branch point unknown
    assert blocked and "the PR edits this kernel's tolerance" in (note or "")
