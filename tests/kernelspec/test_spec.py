"""Kernel specs: KernelBench detection, kforge.yaml loading, and one clear line for every malformed input."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import (
    Implementation,
    KernelSpec,
    discover_kernels,
    find_manifest,
    is_kernelbench_source,
    load_kernelbench,
    load_manifest,
    load_manifest_entry,
    load_spec,
)

DATA = Path(__file__).parents[1] / "data"
KB_SOFTMAX = DATA / "kb" / "softmax.py"
MANIFEST_REPO = DATA / "manifest_repo"

KERNEL = textwrap.dedent('''
    import torch


    def double(x):
        return x * 2


    def make_inputs(n=8):
        return [torch.randn(n)]
''')
REFERENCE = "def double_ref(x):\n    return x + x\n"


# ------------------------------------------------------------------------------------------- KernelBench


def test_kernelbench_problem_is_detected_and_loaded() -> None:
    source = KB_SOFTMAX.read_text()
    assert is_kernelbench_source(source)
    spec = load_spec(KB_SOFTMAX)
    assert spec.format == "kernelbench"
    assert spec.name == "softmax"
    assert spec.entry == "ModelNew"
    assert spec.reference.symbol == "Model" and spec.baseline == spec.reference
    assert spec.inputs_symbol == "get_inputs" and spec.init_symbol == "get_init_inputs"
    assert spec.root == str(KB_SOFTMAX.parent.resolve())
    assert spec.kernel_path == KB_SOFTMAX.resolve()
    assert spec.language == "torch"
    assert set(spec.targets) == {"cpu", "cuda", "xpu", "mps"}


def test_kernelbench_detection_needs_all_three_names() -> None:
    assert not is_kernelbench_source("class Model: pass\ndef get_inputs(): return []\n")
    assert not is_kernelbench_source("def get_inputs(): return []\ndef get_init_inputs(): return []\n")
    assert not is_kernelbench_source("class Model(:\n")  # a syntax error is not a problem file
    # Model must be a class, not some other name
    assert not is_kernelbench_source("Model = 1\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n")
    assert is_kernelbench_source("from x import get_inputs, get_init_inputs\nclass Model: pass\n")


def test_kernelbench_language_guess(tmp_path: Path) -> None:
    base = KB_SOFTMAX.read_text()
    (tmp_path / "t.py").write_text("import triton\n" + base)
    (tmp_path / "c.py").write_text("from torch.utils.cpp_extension import load_inline\n" + base)
    assert load_kernelbench(tmp_path / "t.py").language == "triton"
    assert load_kernelbench(tmp_path / "c.py").language == "cuda"


def test_load_kernelbench_names_the_missing_definitions(tmp_path: Path) -> None:
    path = tmp_path / "half.py"
    path.write_text("class Model:\n    pass\n")
    with pytest.raises(KforgeError) as info:
        load_kernelbench(path)
    _one_line(info, path.name, "get_inputs, get_init_inputs")


def test_a_candidate_file_is_not_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "softmax_new.py"
    shutil.copy(DATA / "kb" / "softmax_new.py", path)
    with pytest.raises(KforgeError) as info:
        load_spec(path)
    _one_line(info, "softmax_new.py", "not a KernelBench problem")


def test_spec_round_trips_through_json() -> None:
    for spec in (load_spec(KB_SOFTMAX), *load_manifest(MANIFEST_REPO / "kforge.yaml").values()):
        again = KernelSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
        assert again == spec


def test_candidate_from_source_targets_the_kernel_file() -> None:
    spec = load_manifest(MANIFEST_REPO / "kforge.yaml")["rmsnorm"]
    cand = spec.candidate_from_source("def rmsnorm(x, w):\n    return x\n")
    assert cand.symbol == "rmsnorm" and cand.filename == "rmsnorm.py" and cand.root == spec.root
    impl = Implementation.from_file(MANIFEST_REPO / "kernels" / "rmsnorm.py", "rmsnorm")
    assert impl.root == str((MANIFEST_REPO / "kernels").resolve())



def test_a_kernelbench_or_gpumode_candidate_is_its_entry_unless_it_is_the_problem_s_own_file_edited() -> None:
    kb = load_spec(KB_SOFTMAX)
    assert kb.candidate_from_source((DATA / "kb" / "softmax_new.py").read_text()).symbol == "ModelNew"
    assert kb.candidate_from_source(KB_SOFTMAX.read_text() + "\n# the tuner's edit\n").symbol == "Model"
    assert kb.candidate_from_source("class ModelNew(:\n").symbol == "ModelNew"  # judged by its SyntaxError
    gm = load_spec(DATA / "gpumode" / "scaled_add_py")
    submission = (DATA / "gpumode" / "scaled_add_py" / "submission.py").read_text()
    assert gm.candidate_from_source(submission).symbol == "custom_kernel"
    assert gm.candidate_from_source("def custom_kernel(data):\n    return nope\n").symbol == "custom_kernel"

# ------------------------------------------------------------------------------------------- manifests


def test_manifest_repo_loads_both_reference_forms_shapes_tolerance_targets() -> None:
    kernels = load_manifest(MANIFEST_REPO / "kforge.yaml")
    assert sorted(kernels) == ["rmsnorm", "scale"]

    rms = kernels["rmsnorm"]
    assert rms.format == "manifest"
    assert rms.kernel_file == "kernels/rmsnorm.py" and rms.entry == "rmsnorm"
    # 'file.py:callable' form
    assert rms.reference.filename == "reference.py" and rms.reference.symbol == "rmsnorm_reference"
    assert "def rmsnorm_reference" in rms.reference.source
    # bare callable form: looked up in the kernel's own file
    assert rms.inputs_source.filename == "rmsnorm.py" and rms.inputs_symbol == "make_inputs"
    assert rms.baseline.symbol == "rmsnorm" and rms.baseline.filename == "rmsnorm.py"
    assert rms.shape_sets == ({"rows": 64, "cols": 128}, {"rows": 16, "cols": 512})
    assert rms.tolerance == {"atol": 1e-5, "rtol": 1e-5}
    assert rms.targets == ("cpu",)
    assert rms.seeds == 2 and rms.language == "torch"
    assert rms.root == str(MANIFEST_REPO.resolve())

    scale = kernels["scale"]
    assert scale.reference == scale.baseline  # no reference: the kernel as first loaded
    assert scale.inputs_source.filename == "scale.py"
    assert scale.init_kwargs == {"factor": 3.0}
    assert scale.shape_sets == ({},) and scale.tolerance is None
    assert scale.targets == ("cpu", "cuda")
    assert scale.seeds == 3  # the default


def test_load_spec_finds_a_manifest_kernel_by_file_dir_or_name() -> None:
    by_file = load_spec(MANIFEST_REPO / "kernels" / "rmsnorm.py")
    assert by_file.name == "rmsnorm"
    assert load_spec(MANIFEST_REPO / "kforge.yaml", "scale").name == "scale"
    assert load_spec(MANIFEST_REPO, "rmsnorm") == by_file
    assert find_manifest(MANIFEST_REPO / "kernels" / "rmsnorm.py") == (MANIFEST_REPO / "kforge.yaml").resolve()
    with pytest.raises(KforgeError) as info:
        load_spec(MANIFEST_REPO / "kforge.yaml")
    _one_line(info, "kforge.yaml", "2 kernels", "--kernel", "rmsnorm, scale")
    with pytest.raises(KforgeError) as info:
        load_spec(MANIFEST_REPO / "kforge.yaml", "nope")
    _one_line(info, "kforge.yaml", "'nope'")


def test_discover_kernels_finds_manifest_and_kernelbench_files(tmp_path: Path) -> None:
    shutil.copytree(MANIFEST_REPO, tmp_path / "repo")
    (tmp_path / "repo" / "problems").mkdir()
    shutil.copy(KB_SOFTMAX, tmp_path / "repo" / "problems" / "softmax.py")
    (tmp_path / "repo" / ".venv").mkdir()
    shutil.copy(KB_SOFTMAX, tmp_path / "repo" / ".venv" / "ignored.py")
    names = sorted(s.name for s in discover_kernels(tmp_path / "repo"))
    assert names == ["rmsnorm", "scale", "softmax"]


def test_one_reading_of_a_file_symbol_reference() -> None:
    from kforge_bot.kernelspec import file_reference

    assert file_reference("kernels/k.py:launch") == ("kernels/k.py", "launch")
    assert file_reference("a:b.py:fn") == ("a:b.py", "fn")
    assert [file_reference(v) for v in ("launch", "pkg.mod:fn", "k.py:", "k.py:not-a-name")] == [None] * 4


def test_every_reading_of_a_checkout_skips_the_same_folders(tmp_path: Path) -> None:
    """One list of folders that hold no kernel (environments, tools' caches, build outputs): `recheck`'s discovery
    and the gate's skip the same ones."""
    from kforge_bot.config.policy import load_policy
    from kforge_bot.kernelspec.kernels import discover

    (tmp_path / "problems").mkdir()
    shutil.copy(KB_SOFTMAX, tmp_path / "problems" / "softmax.py")
    for folder in (".tox", ".nox", ".pytest_cache", "build", "node_modules"):
        (tmp_path / folder).mkdir()
        shutil.copy(KB_SOFTMAX, tmp_path / folder / "copy.py")
    assert [s.kernel_path for s in discover_kernels(tmp_path)] == [tmp_path / "problems" / "softmax.py"]
    assert sorted(discover(tmp_path, load_policy(None))) == ["problems/softmax.py"]


def test_a_single_kernel_manifest_needs_no_kernel_name(tmp_path: Path) -> None:
    _write(tmp_path, {"k": {"file": "k.py", "entry": "double", "inputs": "make_inputs"}})
    assert load_spec(tmp_path / "kforge.yaml").name == "k"


# ------------------------------------------------------------------------------------ malformed inputs


def _one_line(info: pytest.ExceptionInfo[KforgeError], *needles: str) -> None:
    text = str(info.value)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"


def _write(root: Path, kernels: object, extra: str = "", raw: str | None = None) -> Path:
    import json

    import yaml

    kernels = json.loads(json.dumps(kernels))  # no shared objects: the dump would write them as YAML aliases

    (root / "k.py").write_text(KERNEL)
    (root / "ref.py").write_text(REFERENCE)
    manifest = root / "kforge.yaml"
    manifest.write_text(raw if raw is not None else yaml.safe_dump({"version": 1, "kernels": kernels}) + extra)
    return manifest


GOOD = {"file": "k.py", "entry": "double", "inputs": "make_inputs"}

MALFORMED = [
    # (id, kernel settings or raw text, words the one-line error must contain)
    ("bad-yaml", "kernels:\n  k: {file: k.py\n", ["not valid YAML", "line"]),
    ("empty-file", "", ["kernels:"]),
    ("kernels-not-mapping", "kernels: [a, b]\n", ["kernels:"]),
    ("unknown-top-level", "version: 1\nkernal: {}\nkernels: {k: {file: k.py, entry: double, inputs: make_inputs}}\n",
     ["unknown top-level key 'kernal'"]),
    ("version-2", "version: 2\nkernels: {k: {file: k.py, entry: double, inputs: make_inputs}}\n",
     ["version", "2"]),
    ("kernel-not-mapping", {"k": "k.py"}, ["kernels.k", "mapping"]),
    ("missing-file", {"k": {"entry": "double", "inputs": "make_inputs"}}, ["kernels.k", "'file'"]),
    ("missing-entry", {"k": {"file": "k.py", "inputs": "make_inputs"}}, ["kernels.k", "'entry'"]),
    ("missing-inputs", {"k": {"file": "k.py", "entry": "double"}}, ["kernels.k", "'inputs'"]),
    ("unknown-key", {"k": {**GOOD, "tolerence": {"atol": 1}}}, ["kernels.k", "unknown key 'tolerence'"]),
    ("file-not-py", {"k": {**GOOD, "file": "k.cu"}}, ["kernels.k.file", "'k.cu'"]),
    ("file-not-string", {"k": {**GOOD, "file": 3}}, ["kernels.k.file"]),
    ("entry-not-identifier", {"k": {**GOOD, "entry": "dou-ble"}}, ["kernels.k.entry", "'dou-ble'"]),
    ("file-missing", {"k": {**GOOD, "file": "nope.py"}}, ["kernels.k.file", "'nope.py'", "does not exist"]),
    ("entry-symbol-missing", {"k": {**GOOD, "entry": "triple"}}, ["kernels.k.entry", "k.py", "'triple'"]),
    ("reference-file-missing", {"k": {**GOOD, "reference": "gone.py:double_ref"}},
     ["kernels.k.reference", "'gone.py'"]),
    ("reference-symbol-missing", {"k": {**GOOD, "reference": "ref.py:nope"}}, ["kernels.k.reference", "'nope'"]),
    ("reference-bad-form", {"k": {**GOOD, "reference": "ref.txt:double_ref"}}, ["kernels.k.reference", "ref.txt"]),
    ("reference-not-string", {"k": {**GOOD, "reference": ["ref.py"]}}, ["kernels.k.reference"]),
    ("inputs-symbol-missing", {"k": {**GOOD, "inputs": "k.py:make"}}, ["kernels.k.inputs", "'make'"]),
    ("inputs-empty", {"k": {**GOOD, "inputs": " "}}, ["kernels.k.inputs"]),
    ("shapes-not-list", {"k": {**GOOD, "shapes": {"n": 4}}}, ["kernels.k.shapes"]),
    ("shapes-empty", {"k": {**GOOD, "shapes": []}}, ["kernels.k.shapes"]),
    ("shapes-item-not-mapping", {"k": {**GOOD, "shapes": [{"n": 4}, 8]}}, ["kernels.k.shapes"]),
    ("init-not-mapping", {"k": {**GOOD, "init": [1, 2]}}, ["kernels.k.init"]),
    ("init-empty-list", {"k": {**GOOD, "init": []}}, ["kernels.k.init"]),
    ("tolerance-not-mapping", {"k": {**GOOD, "tolerance": 0.01}}, ["kernels.k.tolerance"]),
    ("tolerance-negative", {"k": {**GOOD, "tolerance": {"atol": -1}}}, ["kernels.k.tolerance"]),
    ("tolerance-string", {"k": {**GOOD, "tolerance": {"atol": "1e-3"}}}, ["kernels.k.tolerance"]),
    ("tolerance-bool", {"k": {**GOOD, "tolerance": {"atol": True}}}, ["kernels.k.tolerance"]),
    ("tolerance-unknown-key", {"k": {**GOOD, "tolerance": {"eps": 1}}}, ["kernels.k.tolerance"]),
    ("targets-unknown", {"k": {**GOOD, "targets": ["tpu"]}}, ["kernels.k.targets", "tpu"]),
    ("targets-string", {"k": {**GOOD, "targets": "cpu"}}, ["kernels.k.targets"]),
    ("targets-empty", {"k": {**GOOD, "targets": []}}, ["kernels.k.targets"]),
    ("language-unknown", {"k": {**GOOD, "language": "fortran"}}, ["kernels.k.language", "fortran"]),
    ("seeds-zero", {"k": {**GOOD, "seeds": 0}}, ["kernels.k.seeds"]),
    ("seeds-bool", {"k": {**GOOD, "seeds": True}}, ["kernels.k.seeds"]),
    ("seeds-float", {"k": {**GOOD, "seeds": 2.5}}, ["kernels.k.seeds"]),
    ("import-roots-string", {"k": {**GOOD, "import_roots": "src"}}, ["kernels.k.import_roots", "[src]"]),
    ("import-roots-missing", {"k": {**GOOD, "import_roots": ["nowhere"]}}, ["kernels.k.import_roots", "'nowhere'"]),
    ("import-roots-outside", {"k": {**GOOD, "import_roots": [".."]}}, ["kernels.k.import_roots", "outside the checkout"]),
    ("entry-module-missing", {"k": {**GOOD, "entry": "pkg.gone:double"}}, ["kernels.k.entry", "'pkg.gone'",
                                                                          "import_roots"]),
    ("entry-launcher-missing", {"k": {**GOOD, "entry": "launch.py:double"}}, ["kernels.k.file", "'launch.py'"]),
    ("outputs-negative", {"k": {**GOOD, "outputs": -1}}, ["kernels.k.outputs", "index"]),
    ("outputs-float", {"k": {**GOOD, "outputs": [0, 1.5]}}, ["kernels.k.outputs"]),
    ("outputs-repeated", {"k": {**GOOD, "outputs": [0, 0]}}, ["kernels.k.outputs", "distinct"]),
    ("outputs-none-selected", {"k": {**GOOD, "outputs": []}}, ["kernels.k.outputs"]),
    ("inplace-bad-name", {"k": {**GOOD, "inplace": ["x-y"]}}, ["kernels.k.inplace"]),
    ("backward-not-mapping", {"k": {**GOOD, "backward": ["x"]}}, ["kernels.k.backward", "inputs"]),
    ("backward-no-inputs", {"k": {**GOOD, "backward": {"inputs": []}}}, ["kernels.k.backward.inputs"]),
    ("tolerance-backward-not-mapping", {"k": {**GOOD, "tolerance": {"atol": 0.1, "backward": 0.1}}},
     ["kernels.k.tolerance.backward", "atol"]),
    ("package-init-not-bool", {"k": {**GOOD, "package_init": "no"}}, ["kernels.k.package_init", "true or false"]),
    ("inplace-unknown-parameter", {"k": {**GOOD, "inplace": ["y"]}}, ["kernels.k.inplace", "'y'", "has: x"]),
    ("keep-values-unknown-parameter", {"k": {**GOOD, "keep_values": ["table"]}},
     ["kernels.k.keep_values", "'table'", "has: x"]),
    ("keep-values-not-a-name", {"k": {**GOOD, "keep_values": [1.5]}}, ["kernels.k.keep_values", "index"]),
    ("backward-launcher-without-args", {"k": {**GOOD, "backward": {"inputs": [0], "launcher": "back"}}},
     ["kernels.k.backward", "args"]),
    ("backward-arg-malformed", {"k": {**GOOD, "backward": {"inputs": [0], "launcher": "back",
                                                           "args": ["grad.first"]}}},
     ["kernels.k.backward.args", "'grad.first'"]),
]


@pytest.mark.parametrize("case,settings,needles", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_manifest_gives_one_line_naming_file_and_key(tmp_path: Path, case: str, settings: object,
                                                               needles: list[str]) -> None:
    manifest = _write(tmp_path, settings, raw=settings if isinstance(settings, str) else None)
    with pytest.raises(KforgeError) as info:
        load_manifest(manifest)
    _one_line(info, str(manifest.resolve()), *needles)
    # the CLI's route reports the same error
    with pytest.raises(KforgeError) as again:
        load_spec(manifest, "k")
    assert str(again.value) == str(info.value)


def test_one_entry_loads_on_its_own_while_another_is_broken(tmp_path: Path) -> None:
    import yaml

    manifest = _write(tmp_path, {"good": GOOD, "bad": {**GOOD, "entry": "triple"}})
    with pytest.raises(KforgeError):
        load_manifest(manifest)  # the whole manifest stops at the broken entry
    entries = yaml.safe_load(manifest.read_text())["kernels"]
    good = load_manifest_entry(manifest, "good", entries["good"])
    assert good.name == "good" and good.entry == "double" and Path(good.root) == tmp_path.resolve()
    with pytest.raises(KforgeError) as info:
        load_manifest_entry(manifest, "bad", entries["bad"])
    _one_line(info, str(manifest.resolve()), "kernels.bad.entry", "'triple'")
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump({"version": 1, "kernels": {"good": GOOD}}))
    # the same spec as the whole-manifest loader gives (relative paths resolve against the manifest)
    assert load_manifest_entry(tmp_path / "ok.yaml", "good", GOOD) == load_manifest(tmp_path / "ok.yaml")["good"]


def test_syntax_error_in_a_kernel_file_names_that_file_and_line(tmp_path: Path) -> None:
    manifest = _write(tmp_path, {"k": GOOD})
    (tmp_path / "k.py").write_text("import torch\n\ndef double(x)\n    return x * 2\n")
    with pytest.raises(KforgeError) as info:
        load_manifest(manifest)
    _one_line(info, str((tmp_path / "k.py").resolve()), "line 3", "syntax error")


def test_syntax_error_in_a_reference_file(tmp_path: Path) -> None:
    manifest = _write(tmp_path, {"k": {**GOOD, "reference": "ref.py:double_ref"}})
    (tmp_path / "ref.py").write_text("def double_ref(x):\n    return x +\n")
    with pytest.raises(KforgeError) as info:
        load_manifest(manifest)
    _one_line(info, "ref.py", "line 2", "syntax error")


def test_syntax_error_in_a_kernelbench_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("class Model(nn.Module:\n    pass\n")
    with pytest.raises(KforgeError) as info:
        load_spec(path)
    _one_line(info, "broken.py", "line 1", "syntax error")


def test_missing_paths_and_wrong_kinds_of_file(tmp_path: Path) -> None:
    with pytest.raises(KforgeError) as info:
        load_spec(tmp_path / "nope.py")
    _one_line(info, "nope.py", "file not found")
    with pytest.raises(KforgeError) as info:
        load_spec(tmp_path / "kforge.yaml")
    _one_line(info, "kforge.yaml", "file not found")
    with pytest.raises(KforgeError) as info:
        load_spec(tmp_path)
    _one_line(info, str(tmp_path), "no kforge.yaml")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(KforgeError) as info:
        load_spec(tmp_path / "notes.txt")
    _one_line(info, "notes.txt", ".py")
    (tmp_path / "binary.py").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(KforgeError) as info:
        load_spec(tmp_path / "binary.py")
    _one_line(info, "binary.py", "cannot read")


def test_a_kernel_file_named_by_two_kernels_needs_a_name(tmp_path: Path) -> None:
    _write(tmp_path, {"a": GOOD, "b": GOOD})
    with pytest.raises(KforgeError) as info:
        load_spec(tmp_path / "k.py")
    _one_line(info, "k.py", "--kernel", "a, b")
    assert load_spec(tmp_path / "k.py", "b").name == "b"


def test_a_typo_d_key_gets_a_did_you_mean_and_a_missing_file_names_the_file_key(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text("def f(x):\n    return x\n\ndef g():\n    return []\n")
    manifest = tmp_path / "kforge.yaml"
    manifest.write_text("kernels:\n  k:\n    file: k.py\n    entry: f\n    inputs: g\n    shape: [{}]\n")
    with pytest.raises(KforgeError) as caught:
        load_manifest(manifest)
    assert "kernels.k: unknown key 'shape'" in str(caught.value) and "did you mean 'shapes'?" in str(caught.value)
    manifest.write_text("kernel:\n  k: {}\nkernels:\n  k:\n    file: k.py\n    entry: f\n    inputs: g\n")
    with pytest.raises(KforgeError) as caught:
        load_manifest(manifest)
    assert "did you mean 'kernels'?" in str(caught.value)
    manifest.write_text("kernels:\n  k:\n    file: missing.py\n    entry: f\n    inputs: g\n")
    with pytest.raises(KforgeError) as caught:
        load_manifest(manifest)
    assert "kernels.k.file: file 'missing.py' does not exist" in str(caught.value)


def test_a_src_layout_kernel_with_its_launcher_elsewhere_loads_with_module_names() -> None:
    """import_roots put a src/ package on the path; `entry` may name a module's callable or a launcher file, and
    `file` stays the file the bot rewrites (its candidates keep the module name the launcher imports)."""
    specs = load_manifest(Path(__file__).parents[1] / "data" / "library_repo" / "kforge.yaml")
    norm, swiglu, rope = specs["rms_norm"], specs["swiglu"], specs["rope"]
    assert (norm.kernel_file, norm.entry, norm.baseline.module, norm.baseline.entry_module) == \
        ("src/minilib/ops/norm.py", "rms_norm_forward", "minilib.ops.norm", "")
    assert norm.outputs == (0,) and norm.reference_returns == "outputs" and norm.import_roots == ("src",)
    assert norm.baseline.paths == (str((Path(norm.root) / "src").resolve()),)
    assert (swiglu.baseline.module, swiglu.baseline.entry_module, swiglu.entry_file) == \
        ("minilib.ops.act", "launch.swiglu", "launch/swiglu.py")
    assert swiglu.baseline.source == swiglu.kernel_path.read_text()  # the kernel's text, not the launcher's
    candidate = swiglu.candidate_from_source("def silu_mul(a, b):\n    return a\n")
    assert (candidate.module, candidate.entry_module, candidate.symbol) == ("minilib.ops.act", "launch.swiglu", "swiglu")
    assert rope.outputs == () and rope.inplace == (0, 1)  # parameter names as positions: an oracle's may differ
    assert specs["rms_norm_autograd"].grad_inputs == (0, 1)
    assert specs["rms_norm_launchers"].backward_launcher == {
        "launcher": "rms_norm_backward", "args": ["grad.0", "input.X", "input.W", "output.2"], "returns": None}
    assert KernelSpec.from_dict(json.loads(json.dumps(swiglu.to_dict()))) == swiglu


# ------------------------------------------------------------------- paths, names and sizes (issue 28)


@pytest.mark.parametrize("key,value", [
    ("file", "/tmp/k.py"), ("file", "~/k.py"), ("reference", "../outside.py:reference"),
    ("inputs", "/tmp/x.py:make_inputs"), ("file", "k\0.py")])
def test_a_path_outside_the_checkout_is_one_line_naming_the_key(tmp_path: Path, key: str, value: str) -> None:
    """Class 5: an absolute path, `~` or `..`: never read, one line naming the key."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "outside.py").write_text(REFERENCE)
    manifest = _write(repo, {"k": {**GOOD, key: value}})
    with pytest.raises(KforgeError) as info:
        load_manifest(manifest)
    _one_line(info, "kforge.yaml", f"kernels.k.{key}: ", "the checkout")


def test_a_symbolic_link_out_of_the_checkout_is_refused_and_one_inside_is_read(tmp_path: Path) -> None:
    """Class 5: symbolic links are resolved before the check: a committed `.py` link to a file outside is refused."""
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = tmp_path / "secret.py"
    secret.write_text(KERNEL.replace("def ", "TOKEN = 'canary'\n\n\ndef ", 1))
    manifest = _write(repo, {"k": {**GOOD, "file": "link.py"}})
    (repo / "link.py").symlink_to(secret)
    with pytest.raises(KforgeError) as info:
        load_manifest(manifest)
    _one_line(info, "kernels.k.file: 'link.py' resolves outside the checkout")
    assert "canary" not in str(info.value)
    (repo / "link.py").unlink()
    (repo / "link.py").symlink_to(repo / "k.py")  # inside: fine
    assert load_manifest(manifest)["k"].baseline.source == KERNEL
    sub = repo / "sub"
    sub.mkdir()
    (sub / "kforge.yaml").write_text("kernels:\n  k: {file: ../k.py, entry: double, inputs: make_inputs}\n")
    with pytest.raises(KforgeError):
        load_manifest(sub / "kforge.yaml")  # alone, a manifest's boundary is its folder
    assert load_manifest(sub / "kforge.yaml", boundary=repo)["k"].name == "k"  # the checkout's, as the gate reads it


@pytest.mark.parametrize("name", ["k\n::error::pwned", "a b", "-dash", "x" * 65, "k`", "k]("])
def test_kernel_names_are_held_to_a_safe_charset(tmp_path: Path, name: str) -> None:
    """Class 9: a kernel's name reaches logs, annotations, branch names and PR text."""
    with pytest.raises(KforgeError) as info:
        load_manifest(_write(tmp_path, {name: GOOD}))
    _one_line(info, "kernels: kernel name", "not allowed", "letters, digits")
    assert "\n" not in str(info.value) and "::error" not in str(info.value).replace("\\n::error", "")


def test_counts_are_capped(tmp_path: Path) -> None:
    """Class 8: sizes and counts of what a manifest asks for are bounded."""
    with pytest.raises(KforgeError, match=r"kernels: 257 kernels, over the cap of 256"):
        load_manifest(_write(tmp_path, {f"k{i}": GOOD for i in range(257)}))
    with pytest.raises(KforgeError, match=r"kernels.k.shapes: 65 shape sets, at most 64"):
        load_manifest(_write(tmp_path, {"k": {**GOOD, "shapes": [{}] * 65}}))


def test_kernel_names_only_the_one_kernel_of_a_kernelbench_file_or_gpumode_folder() -> None:
    assert load_spec(KB_SOFTMAX, "softmax").name == "softmax"
    with pytest.raises(KforgeError, match="--kernel 'foo': this is a KernelBench problem"):
        load_spec(KB_SOFTMAX, "foo")
    with pytest.raises(KforgeError, match="--kernel 'foo': this is a GPU MODE problem"):
        load_spec(DATA / "gpumode" / "scaled_add_py", "foo")


@pytest.mark.parametrize("constraints,message", [
    ("{cols: {multiple_of: 256}}", None),
    ("{rows: {fixed: true}, cols: {min: 512, max: 4096}}", None),
    ("{colz: {multiple_of: 256}}", "no shape set has an integer size 'colz'"),
    ("{cols: {multiple: 256}}", "unknown key 'multiple'"),
    ("{cols: {multiple_of: 0}}", "multiple_of: expected a positive integer"),
    ("{cols: {fixed: 1}}", "fixed: expected true or false"),
    ("{cols: {min: 9000, max: 10}}", "min 9000 is above max 10"),
    ("{cols: {multiple_of: 3000}}", "shapes[0].cols: 1024 breaks its constraint"),
    ("[cols]", "expected a mapping of size name"),
])
def test_manifest_constraints_are_validated_with_one_line_errors(tmp_path: Path, constraints: str,
                                                                  message: str | None) -> None:
    (tmp_path / "k.py").write_text("def k(x):\n    return x\n\n\ndef make(rows, cols):\n    return []\n")
    (tmp_path / "kforge.yaml").write_text(
        "version: 1\nkernels:\n  k:\n    file: k.py\n    entry: k\n    inputs: k.py:make\n"
        f"    shapes: [{{rows: 64, cols: 1024}}]\n    constraints: {constraints}\n")
    if message is None:
        spec = load_spec(tmp_path / "kforge.yaml", "k")
        assert spec.constraints and KernelSpec.from_dict(spec.to_dict()) == spec
        return
    with pytest.raises(KforgeError) as caught:
        load_spec(tmp_path / "kforge.yaml", "k")
    assert message in str(caught.value) and "kforge.yaml" in str(caught.value) and "\n" not in str(caught.value)


def test_keep_values_are_positions_and_a_name_an_imported_entry_hides_says_to_give_one(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text("def rotate(x, table):\n    return x * table\n")
    (tmp_path / "launch.py").write_text("from k import rotate as launch\n")
    (tmp_path / "inputs.py").write_text("import torch\n\n\ndef make_inputs():\n"
                                        "    return [torch.ones(4), torch.ones(4)]\n")
    manifest = tmp_path / "kforge.yaml"
    entry = ("version: 1\nkernels:\n"
             "  k: {{file: k.py, entry: {entry}, inputs: inputs.py:make_inputs, keep_values: {keep}}}\n")
    manifest.write_text(entry.format(entry="rotate", keep="[table]"))
    spec = load_spec(manifest, "k")
    assert spec.keep_values == (1,) and KernelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    manifest.write_text(entry.format(entry="launch.py:launch", keep="[table]"))  # imported there: no parameters
    with pytest.raises(KforgeError) as info:
        load_spec(manifest, "k")
    _one_line(info, str(manifest.resolve()), "kernels.k.keep_values", "'table'", "keep_values: [1]")
    manifest.write_text(entry.format(entry="launch.py:launch", keep="[1]"))
    assert load_spec(manifest, "k").keep_values == (1,)
