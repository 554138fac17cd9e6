"""Policies: loading, validation errors that name the key, gate rules, schema, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kforge_bot.config import policy as pol
from kforge_bot.config.schema import json_schema
from kforge_bot.errors import KforgeError

REPO = Path(__file__).resolve().parents[2]


def test_shipped_policies_validate_and_default_yml_is_the_code_default():
    shipped = pol.shipped_policies()
    assert set(shipped) >= {"default", "strict"}
    for path in shipped.values():
        pol.load_policy(path)
    assert pol.load_policy() == pol.Policy()
    assert pol.load_policy(REPO / "policies" / "default.yml") == pol.Policy()
    strict = pol.load_policy("strict")
    assert strict != pol.Policy()
    assert strict.gate.confidence > pol.Policy().gate.confidence
    assert strict.min_speedup > pol.Policy().min_speedup
    assert strict.trust.allowed_associations == ("OWNER", "MEMBER") and not strict.trust.allow_forks


@pytest.mark.parametrize("name", ["default", "strict"])
def test_repository_policies_link_to_the_packaged_files(name):
    assert (REPO / "policies" / f"{name}.yml").resolve() == (pol.policies_dir() / f"{name}.yml").resolve()


def test_defaults_match_the_brief():
    d = pol.Policy()
    assert d.gate.threshold == {"cpu": 0.05, "cuda": 0.02, "xpu": 0.02, "mps": 0.02} and d.gate.confidence == 0.95
    assert d.gate.require_all_targets is False
    assert d.trust.allowed_associations == ("OWNER", "MEMBER", "COLLABORATOR")
    assert d.trust.trigger_label == "kforge:run" and d.trust.allow_forks is False
    assert d.allow_framework_fallback is False


def _load(tmp_path: Path, text: str) -> pol.Policy:
    p = tmp_path / "x.yml"
    p.write_text(text)
    return pol.load_policy(p)


@pytest.mark.parametrize(("text", "message"), [
    ("gate:\n  threshold: fast\n", "gate.threshold: expected a number between 0 and 1, got 'fast'"),
    ("gate:\n  threshold: 1.5\n", "gate.threshold: expected a number between 0 and 1, got 1.5"),
    ("gate:\n  threshold: true\n", "gate.threshold: expected a number between 0 and 1, got true"),
    ("gate:\n  threshold: {gpu: 0.02}\n", "gate.threshold.gpu: unknown key (allowed here: cpu, cuda, xpu, mps)"),
    ("gate:\n  threshold: {cpu: 2}\n", "gate.threshold.cpu: expected a number between 0 and 1, got 2"),
    ("gate:\n  threshold: {}\n", "gate.threshold: expected a number between 0 and 1 or a mapping"),
    ("gate:\n  require_all_targets: sometimes\n", "gate.require_all_targets: expected true or false"),
    ("gate:\n  rules:\n    - {kernel: x, threshold: {cpu: fast}}\n", "gate.rules[0].threshold.cpu: expected a number"),
    ("gate:\n  confidence: 1\n", "gate.confidence: expected a number between 0.5 and 1 (exclusive of 1), got 1"),
    ("gate:\n  rules:\n    - path: a\n      thresold: 0.1\n", "gate.rules[0].thresold: unknown key"),
    ("gate:\n  rules:\n    - threshold: 0.1\n", "gate.rules[0]: a rule needs `path`"),
    ("gate:\n  rules:\n    - kernel: x\n", "gate.rules[0]: a rule must set at least one of threshold, confidence, skip"),
    ("gate:\n  rules:\n    - {kernel: x, shape_sets: {one: {informational: true}}}\n",
     "gate.rules[0].shape_sets.one: expected a shape set's index (0, 1, ...), got 'one'"),
    ("gate:\n  rules:\n    - {kernel: x, shape_sets: {0: {reason: why}}}\n",
     "gate.rules[0].shape_sets.0: a shape set entry sets a threshold or informational: true"),
    ("gate:\n  rules:\n    - {kernel: x, shape_sets: {0: {treshold: 0.1}}}\n", "gate.rules[0].shape_sets.0.treshold: unknown key"),
    ("gate:\n  rules:\n    - {kernel: x, shape_sets: [0]}\n", "gate.rules[0].shape_sets: expected a mapping of shape set"),
    ("gate:\n  rules:\n    - {kernel: x, skip: maybe}\n", "gate.rules[0].skip: expected true or false, got 'maybe'"),
    ("gate:\n  rules: {path: x}\n", "gate.rules: expected a list of rules, got a mapping"),
    ("gate: 0.02\n", "gate: expected a mapping, got 0.02"),
    ("treshold: 0.1\n", "treshold: unknown key"),
    ("min_speedup: 0.9\n", "min_speedup: expected a number of at least 1, got 0.9"),
    ("budgets:\n  iterations: 2.5\n", "budgets.iterations: expected an integer of at least 1, got 2.5"),
    ("budgets:\n  tokens: 0\n", "budgets.tokens: expected an integer of at least 1, got 0"),
    ("trust:\n  allowed_associations: [OWNER, ADMIN]\n",
     "trust.allowed_associations[1]: expected one of OWNER, MEMBER, COLLABORATOR"),
    ("trust:\n  allow_forks: 'yes'\n", "trust.allow_forks: expected true or false, got 'yes'"),
    ("languages: [triton, fortran]\n", "languages[1]: expected one of triton, cuda, cpp, c, torch, sycl"),
    ("languages: []\n", "languages: expected at least one entry"),
    ("kernel_paths: [/abs/*.py]\n", "kernel_paths[0]: expected a repository-relative glob, got '/abs/*.py'"),
    ("kernel_paths: ['../x']\n", "kernel_paths[0]: expected a repository-relative glob"),
    ("required_targets: [H200!]\n", "required_targets[0]: expected a target kind"),
    ("evaluation:\n  seeds: 0\n", "evaluation.seeds: expected an integer between 1 and 100, got 0"),
    ("evaluation:\n  timeout_s: 5\n  timing_budget_s: 10\n", "evaluation.timeout_s: must be at least evaluation.timing_budget_s"),
    ("version: 2\n", "version: expected 1, got 2"),
    ("- a\n- b\n", "expected a mapping, got a list"),
    ("gate:\n  threshold: 0.1\n  threshold: 0.2\n", "duplicate key 'threshold'"),
    ("gate: [unclosed\n", "not valid YAML (line"),
])
def test_invalid_policy_is_one_line_naming_file_and_key(tmp_path, text, message):
    with pytest.raises(KforgeError) as err:
        _load(tmp_path, text)
    line = str(err.value)
    assert line.startswith(str(tmp_path / "x.yml") + ": "), line
    assert message in line, line
    assert "\n" not in line


def test_partial_policy_keeps_defaults_for_the_rest(tmp_path):
    p = _load(tmp_path, "gate:\n  threshold: 0.05\nbudgets:\n  iterations: 3\n")
    assert p.gate.threshold == {k: 0.05 for k in pol.TARGET_KINDS} and p.gate.confidence == 0.95
    assert p.budgets.iterations == 3 and p.budgets.tokens == pol.Policy().budgets.tokens
    assert _load(tmp_path, "") == pol.Policy()  # an empty file is the default policy


def test_rule_for_first_match_wins_and_inherits_defaults(tmp_path):
    p = _load(tmp_path, """
gate:
  threshold: 0.03
  confidence: 0.9
  rules:
    - {path: "kernels/attention/**", kernel: "flash_*", threshold: 0.10}
    - {path: "kernels/attention/**", confidence: 0.99}
    - {kernel: "*_small", skip: true, reason: "too short to time"}
""")
    r = p.rule_for("flash_fwd", "kernels/attention/fa.py")
    assert (r.threshold, r.confidence, r.skip) == (0.10, 0.9, False) and r.matched.startswith("gate.rules[0]")
    r = p.rule_for("other", "./kernels/attention/sub/x.py")  # rule 0 needs both name and path
    assert (r.threshold, r.confidence) == (0.03, 0.99) and r.matched.startswith("gate.rules[1]")
    r = p.rule_for("rms_small", "kernels/norm.py")
    assert r.skip and r.reason == "too short to time" and r.threshold == 0.03
    r = p.rule_for("rms", "kernels/norm.py")
    assert (r.threshold, r.confidence, r.skip, r.matched) == (0.03, 0.9, False, "gate defaults")


def test_threshold_depends_on_the_target_kind(tmp_path):
    d = pol.Policy()
    assert d.rule_for("k", "k.py", "cpu").threshold == 0.05
    assert d.rule_for("k", "k.py", "cpu").threshold_from == "gate.threshold.cpu"
    assert all(d.rule_for("k", "k.py", kind).threshold == 0.02 for kind in ("cuda", "xpu", "mps"))
    assert d.rule_for("k", "k.py").threshold == 0.02  # no target: the strictest
    p = _load(tmp_path, """
gate:
  threshold: {cpu: 0.10}
  rules:
    - {kernel: "*_small", threshold: {cuda: 0.05}}
    - {kernel: "flat", threshold: 0.07}
""")
    assert p.gate.threshold == {"cpu": 0.10, "cuda": 0.02, "xpu": 0.02, "mps": 0.02}  # unnamed kinds keep defaults
    assert p.rule_for("k", "k.py", "cpu").threshold == 0.10
    r = p.rule_for("rms_small", "k.py", "cuda")
    assert r.threshold == 0.05 and r.threshold_from == "gate.rules[0].threshold.cuda"
    r = p.rule_for("rms_small", "k.py", "cpu")  # the rule names no cpu value: the gate's
    assert r.threshold == 0.10 and r.threshold_from == "gate.threshold.cpu"
    assert all(p.rule_for("flat", "k.py", kind).threshold == 0.07 for kind in pol.TARGET_KINDS)
    with pytest.raises(KforgeError):
        p.rule_for("k", "k.py", "tpu")


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("**", "a/b/c.py", True),
    ("*.cu", "src/deep/k.cu", True),  # no "/": any depth, like .gitignore
    ("*.cu", "src/k.cuh", False),
    ("kernels/*.py", "kernels/a.py", True),
    ("kernels/*.py", "kernels/sub/a.py", False),
    ("kernels/**/*.py", "kernels/a.py", True),
    ("kernels/**/*.py", "kernels/x/y/a.py", True),
    ("kernels/**", "kernels/x/y/a.cu", True),
    ("kernels", "kernels/a.py", True),  # a directory covers what is below it
    ("kernels/a?.py", "kernels/ab.py", True),
    ("kernels/[!x]*.py", "kernels/xa.py", False),
    ("kernels/[!x]*.py", "kernels/ya.py", True),
    ("src/kernels/**", "kernels/a.py", False),
])
def test_path_globs(pattern, path, expected):
    assert pol.path_matches(pattern, path) is expected


def test_kernel_paths_and_other_queries():
    strict = pol.load_policy("strict")
    assert strict.is_kernel_path("kernels/norm/rms.py") and strict.is_kernel_path("csrc/gemm.cu")
    assert not strict.is_kernel_path("docs/index.md")
    assert strict.allows_language("triton") and not strict.allows_language("sycl")
    assert strict.trusts("member") and not strict.trusts("CONTRIBUTOR")


def test_to_dict_round_trips():
    for name in ("default", "strict"):
        p = pol.load_policy(name)
        assert pol.parse_policy(yaml.safe_load(yaml.safe_dump(p.to_dict())), "roundtrip") == p


def test_shape_sets_of_a_rule_set_their_own_threshold_or_are_informational(tmp_path):
    p = _load(tmp_path, """
gate:
  threshold: {cpu: 0.05}
  rules:
    - kernel: mm
      threshold: 0.10
      shape_sets:
        0: {informational: true, reason: "a warm-up size"}
        2: {threshold: {cpu: 0.30}}
        3: {threshold: {cuda: 0.01}}
""")
    r = p.rule_for("mm", "mm.py", "cpu")
    assert (r.threshold, r.informational_shapes, r.shape_thresholds) == (0.10, (0,), {2: 0.30, 3: 0.10})
    assert r.shape_settings() == {"regression_threshold": 0.10, "shape_thresholds": {2: 0.30, 3: 0.10},
                                  "informational_shapes": (0,)}
    assert p.rule_for("mm", "mm.py", "cuda").shape_thresholds == {2: 0.10, 3: 0.01}
    assert p.rule_for("other", "o.py", "cpu").shape_settings() == {"regression_threshold": 0.05,
                                                                   "shape_thresholds": {}, "informational_shapes": ()}
    assert pol.parse_policy(yaml.safe_load(yaml.safe_dump(p.to_dict())), "roundtrip") == p
    assert pol.parse_policy(json.loads(json.dumps(p.to_dict())), "roundtrip") == p  # keys as strings too


# --- CLI -------------------------------------------------------------------------------------


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_policy_check_valid_files_exit_0():
    r = _cli("policy", "check", "policies/default.yml", "policies/strict.yml")
    assert r.returncode == 0, r.stderr
    assert "policies/default.yml: valid policy" in r.stdout and "policies/strict.yml: valid policy" in r.stdout


def test_policy_check_invalid_file_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "x.yml"
    bad.write_text("gate:\n  threshold: fast\n")
    r = _cli("policy", "check", str(bad))
    assert r.returncode == 2
    assert r.stderr.strip() == f"kforge-bot: error: {bad}: gate.threshold: expected a number between 0 and 1, got 'fast'"
    r = _cli("policy", "check", "policies/default.yml", str(bad), str(tmp_path / "missing.yml"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and "missing.yml: policy file not found" in lines[1]


def test_policy_show_prints_the_effective_policy(tmp_path):
    partial = tmp_path / "p.yml"
    partial.write_text("min_speedup: 1.2\n")
    r = _cli("policy", "show", str(partial))
    assert r.returncode == 0, r.stderr
    shown = yaml.safe_load(r.stdout)
    assert shown["min_speedup"] == 1.2 and shown["gate"]["threshold"] == {"cpu": 0.05, "cuda": 0.02, "xpu": 0.02,
                                                                          "mps": 0.02}
    r = _cli("policy", "show", "strict", "--json")
    assert json.loads(r.stdout) == pol.load_policy("strict").to_dict()


def test_policy_schema_command_prints_the_schema():
    r = _cli("policy", "schema")
    assert r.returncode == 0 and json.loads(r.stdout) == json_schema()


def test_kernel_languages_are_one_vocabulary_with_the_manifests_and_the_old_spelling_still_reads(tmp_path):
    from kforge_bot.kernelspec import KERNEL_LANGUAGES

    path = tmp_path / "p.yml"
    path.write_text("version: 1\nlanguages: [torch, c, pytorch]\n")
    assert pol.load_policy(path).languages == ("torch", "c", "torch")
    assert set(KERNEL_LANGUAGES) == set(pol.load_policy(None).languages)


def test_a_manifest_may_still_say_pytorch(tmp_path):
    from kforge_bot.kernelspec import load_manifest

    (tmp_path / "k.py").write_text("def k(x):\n    return x * 2\n\ndef make(n):\n    import torch\n    return [torch.randn(n)]\n")
    (tmp_path / "kforge.yaml").write_text("version: 1\nkernels:\n  k:\n    file: k.py\n    entry: k\n"
                                          "    inputs: k.py:make\n    shapes: [{n: 4}]\n    language: pytorch\n")
    assert load_manifest(tmp_path / "kforge.yaml")["k"].language == "torch"


def test_a_near_miss_of_a_policy_key_is_named() -> None:
    with pytest.raises(KforgeError) as caught:
        pol.parse_policy({"languges": ["triton"]}, "p.yml")
    assert "languges: unknown key" in str(caught.value) and "did you mean 'languages'?" in str(caught.value)


def _run_config(path, **flags):  # -> RunConfig: as `kforge-bot optimize --policy PATH` builds it
    from kforge_bot.optimize.run import RunConfig
    from kforge_bot.kernelspec import load_spec

    spec = load_spec(Path(__file__).parents[1] / "data" / "kb" / "softmax.py")
    return RunConfig.from_policy(pol.load_policy(path), spec, "cpu", command="optimize", quick=path is None, **flags)


def test_the_speed_of_light_stop_is_a_fraction_and_reaches_the_run(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text("version: 1\nbudgets:\n  speed_of_light: 0.8\n")
    assert pol.load_policy(path).budgets.speed_of_light == 0.8
    assert _run_config(path).budgets.speed_of_light == 0.8
    path.write_text("version: 1\nbudgets:\n  speed_of_light: 90\n")
    with pytest.raises(KforgeError) as bad:
        pol.load_policy(path)
    assert "budgets.speed_of_light" in str(bad.value) and "\n" not in str(bad.value)


def test_patience_is_a_count_and_reaches_the_run_rules(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text("version: 1\nbudgets:\n  patience: 12\n")
    assert pol.load_policy(path).budgets.patience == 12
    assert _run_config(path).budgets.patience == 12
    assert _run_config(path, patience=3).budgets.patience == 3  # --patience over the policy
    assert _run_config(None).budgets.patience is None  # the mode's own: 6 tuner, 4 LLM
    path.write_text("version: 1\nbudgets:\n  patience: 0\n")
    with pytest.raises(KforgeError) as bad:
        pol.load_policy(path)
    assert "budgets.patience" in str(bad.value) and "\n" not in str(bad.value)


# ------------------------------------------------------------------------ the base's policy (issue 28)


def test_under_actions_gate_and_pr_are_sandboxed_whatever_the_policy_says():
    """Class 1: `isolation: required` is a floor under GitHub Actions that no file can lower."""
    actions = {"GITHUB_ACTIONS": "true"}
    for mode in ("off", "preferred", None):
        policy = pol.Policy(isolation=mode)
        assert policy.isolation_mode("gate", actions) == policy.isolation_mode("pr", actions) == "required"
    assert pol.Policy(isolation="off").isolation_mode("gate", {}) == "off"  # elsewhere the file decides
    assert pol.Policy(isolation="off").isolation_mode("check", actions) == "off"  # `check` is a person's command
    assert pol.Policy().isolation_mode("pr", {}) == "preferred"


def test_a_policy_in_the_checkout_is_read_from_the_base_commit(tmp_path):
    """Class 1: the working tree holds the pull request; the policy the gate and the bot use is the base's."""
    from fakes.gitrepos import commit_all, git

    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "policy.yml").write_text("min_speedup: 1.5\n")
    base = commit_all(tmp_path, "base")
    (tmp_path / "policy.yml").write_text('min_speedup: 1.0\nisolation: "off"\n')  # the head's, not committed even
    got = pol.load_policy_from_base(tmp_path, base, tmp_path / "policy.yml")
    assert got.min_speedup == 1.5 and got.isolation is None and got.source == f"policy.yml (base {base[:12]})"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "new.yml").write_text("min_speedup: 1.0\n")
    with pytest.raises(KforgeError, match=r"policy file sub/new.yml is not in the base commit"):
        pol.load_policy_from_base(tmp_path, base, tmp_path / "sub" / "new.yml")
    outside = tmp_path.parent / f"{tmp_path.name}-runner.yml"  # the runner's own file, outside the checkout
    outside.write_text("min_speedup: 2.0\n")
    assert pol.load_policy_from_base(tmp_path, base, outside).min_speedup == 2.0
    assert pol.load_policy_from_base(tmp_path, base, "strict").isolation == "required"  # a shipped policy
    assert pol.load_policy_from_base(tmp_path, base, None) == pol.load_policy(None)


def test_yaml_anchors_in_a_policy_are_refused(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text("gate: &g {confidence: 0.9}\nevaluation: {seeds: 2}\n")
    with pytest.raises(KforgeError, match=r"p.yml: not valid YAML \(line 1, column 7: YAML anchors"):
        pol.load_policy(path)


def test_eval_settings_are_the_policys_with_the_flags_given_over_them(tmp_path):
    """One step from a policy to a command's EvalSettings (check, precommit, optimize, the PR bot, the gate)."""
    path = tmp_path / "p.yml"
    path.write_text("version: 1\nallow_framework_fallback: true\nisolation: required\n"
                    "evaluation: {seeds: 4, timing_budget_s: 6, timeout_s: 90, memory_limit_gb: 2}\n")
    policy = pol.load_policy(path)
    s = policy.eval_settings("check")
    assert (s.seeds, s.timing_budget_s, s.timeout_s, s.isolation, s.allow_framework_fallback) == (4, 6, 90, "required", True)
    assert s.memory_limit_bytes == 2 << 30
    s = policy.eval_settings("check", seeds=2, timing_budget_s=None, timeout_s=30, measure=False)  # None: not given
    assert (s.seeds, s.timing_budget_s, s.timeout_s, s.measure) == (2, 6, 30, False)
    quick = policy.eval_settings("optimize", quick=True)  # no policy file: a quick look, the rest as the policy's
    assert (quick.seeds, quick.timing_budget_s, quick.memory_limit_bytes) == (2, 2.0, 2 << 30)
    assert pol.load_policy(None).eval_settings("check", quick=True).seeds is None  # the kernel's own seeds


def test_one_run_config_from_the_policy_for_optimize_and_the_pr_bot(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text("version: 1\nbudgets: {iterations: 7, tokens: 900}\nevaluation: {seeds: 5, timing_budget_s: 4}\n"
                    "gate: {rules: [{kernel: softmax, threshold: 0.2}]}\nlanguages: [triton]\n")
    tuner = _run_config(path)
    assert (tuner.budgets.iterations, tuner.budgets.tokens) == (7, None)  # no model: no tokens to spend
    assert (tuner.settings.seeds, tuner.settings.timing_budget_s, tuner.settings.regression_threshold) == (5, 4, 0.2)
    assert tuner.languages == ("triton",)
    llm = _run_config(path, endpoint=object(), iterations=2, tokens=50, timing_budget_s=1.5)
    assert (llm.budgets.iterations, llm.budgets.tokens, llm.settings.timing_budget_s) == (2, 50, 1.5)


def test_the_timing_budgets_earlier_key_still_works_with_one_note(tmp_path):
    """evaluation.time_budget_s was renamed timing_budget_s (one evaluation's timing, never a run's budget): a file
    with the old key loads as before and says once, on stderr, what to call it; both keys at once is a mistake."""
    old = tmp_path / "old.yml"
    old.write_text("version: 1\nevaluation:\n  time_budget_s: 7\n  timeout_s: 60\n")
    code = ("import sys\nfrom kforge_bot.config.policy import load_policy\n"
            "for _ in range(2):\n    print(load_policy(sys.argv[1]).evaluation.timing_budget_s)\n")
    done = subprocess.run([sys.executable, "-c", code, str(old)], capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.split() == ["7.0", "7.0"] or done.stdout.split() == ["7", "7"]
    notes = done.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0] == (f"{old}: note: evaluation.time_budget_s is deprecated; call it "
                                            "evaluation.timing_budget_s (the same seconds of timing in one evaluation)")
    both = tmp_path / "both.yml"
    both.write_text("version: 1\nevaluation:\n  time_budget_s: 7\n  timing_budget_s: 8\n")
    with pytest.raises(KforgeError) as caught:
        pol.load_policy(both)
    assert "evaluation.time_budget_s: is the earlier name of evaluation.timing_budget_s" in str(caught.value)
    bad = tmp_path / "bad.yml"
    bad.write_text("version: 1\nevaluation:\n  time_budget_s: -1\n")
    with pytest.raises(KforgeError, match="evaluation.time_budget_s"):  # named as the file writes it
        pol.load_policy(bad)


def test_timing_keys_reach_the_evaluation_settings(tmp_path):
    """evaluation.cpu_threads pins the workers' threads; evaluation.disturbance sets the detector's limits;
    gate.inconclusive says what an undecided timing does to the gate."""
    path = tmp_path / "p.yml"
    path.write_text("version: 1\nevaluation:\n  cpu_threads: 1\n"
                    "  disturbance: {preempted_share: 0.4, crowded_share: 1}\ngate:\n  inconclusive: pass\n")
    settings = pol.load_policy(path).eval_settings("gate")
    assert settings.cpu_threads == 1 and settings.inconclusive == "pass"
    assert (settings.max_preempted_share, settings.max_preempted_gap, settings.max_crowded_share) == (0.4, None, 1.0)
    assert pol.load_policy(None).eval_settings("gate").inconclusive == "fail"
    path.write_text("version: 1\ngate:\n  inconclusive: maybe\n")
    with pytest.raises(KforgeError, match="gate.inconclusive: expected fail or pass, got 'maybe'"):
        pol.load_policy(path)
    path.write_text("version: 1\nevaluation:\n  disturbance: {preempted: 0.4}\n")
    with pytest.raises(KforgeError, match="evaluation.disturbance"):
        pol.load_policy(path)
