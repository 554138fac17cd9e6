"""GPU MODE problems as they are (the `gpu-mode/reference-kernels` layout): the one module that reads them.

A problem is a folder::

    task.yml       tests: and benchmarks: (lists of keyword sets, each with a seed), files:, lang:, ...
    reference.py   generate_input(**kw) -> data; ref_kernel(data) -> output; often check_implementation(data, output)
    task.py        the input_t / output_t types (imported by the reference and by submissions)
    submission.py  an example submission: custom_kernel(data) -> output

Mapped onto a KernelSpec: every `tests` and `benchmarks` keyword set is a shape set checked for correctness, and
only the `benchmarks` sets are timed. Speed is measured against `ref_kernel` (as KernelBench's against `Model`);
submission.py, where the folder has one, is the kernel as written (what the gate compares, and what `check`
checks without --candidate). The seed a keyword set names is dropped: the harness passes its own secret
seeds as `seed=` (as it seeds every format). `data` reaches `ref_kernel` and `custom_kernel` as one object.
`check_implementation`, where the reference defines it, is an extra oracle run beside the harness's own checks,
never instead of them. The modules `files:` lists (task.py, and utils.py, often `../utils.py`) are written
beside every implementation in its worker, as GPU MODE's evaluator copies them into one folder.

Nothing here imports user code: files are read as text (and YAML) through kforge_bot.config.reader, inside the
checkout (`boundary`): a `files:` entry may climb to the problems' shared `../utils.py`, never out of the repository,
never to a device or a link out. The folder's name is the kernel's name in every report, so it is held to the
reader's safe-name rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec.model import MAX_SHAPE_SETS, TARGET_KINDS, Implementation, KernelSpec
from kforge_bot.kernelspec.source import defines, guess_language, parse_python, read_source

TASK_NAME = "task.yml"
REFERENCE = "reference.py"
SUBMISSION = "submission.py"
ENTRY = "custom_kernel"
SEED_KEY = "seed"
_SUBMISSION_SOURCE = "@SUBMISSION@"  # task.yml's placeholder for the submission in `files:`
MAX_SUPPORT_FILES = 16  # GPU MODE's problems list two or three; each is read whole on the host
# A layout some problems use beside GPU MODE's: inputs, a forward and its backward, checked by their own eval.py.
FORWARD_BACKWARD = ("generate_inputs", "reference_forward", "reference_backward")


def is_gpumode_problem(path: str | Path) -> bool:
    """A folder (or its task.yml) in GPU MODE's layout: task.yml beside a reference.py."""
    path = Path(path)
    folder = path.parent if path.name == TASK_NAME else path
    return (folder / TASK_NAME).is_file() and (folder / REFERENCE).is_file()


def load_gpumode(path: str | Path, boundary: str | Path | None = None) -> KernelSpec:
    """The spec of one GPU MODE problem, from its folder or its task.yml. Every file it reads lies inside
    `boundary` (the checkout; default: the git working tree the folder is in, else the folder's parent)."""
    folder, boundary = _problem_folder(Path(path).absolute(), boundary)
    task_file = folder / TASK_NAME
    task = _load_task(task_file, boundary)
    _check_supported(task, task_file)
    tests, benchmarks = _tests_and_benchmarks(task, task_file)
    source = _reference_source(folder / REFERENCE, boundary)
    reference = Implementation(source=source, symbol="ref_kernel", filename=REFERENCE, root=str(folder))
    submission = folder / SUBMISSION
    kernel = None  # the problem's submission.py, where it has one: the kernel as written (the gate, check without it)
    submission_source = read_source(submission, boundary) if submission.is_file() else ""
    if defines(submission_source, ENTRY):
        kernel = Implementation(source=submission_source, symbol=ENTRY, filename=SUBMISSION, root=str(folder))
    inputs = Implementation(source=source, symbol="generate_input", filename=REFERENCE, root=str(folder))
    shape_sets = tuple(tests + benchmarks)
    timed = tuple(range(len(tests), len(shape_sets))) if benchmarks else tuple(range(len(tests)))
    return KernelSpec(
        name=folder.name,
        format="gpumode",
        root=str(folder),
        kernel_file=SUBMISSION,
        entry=ENTRY,
        reference=reference,
        baseline=reference,
        inputs_symbol="generate_input",
        inputs_source=inputs,
        shape_sets=shape_sets,
        tolerance=_tolerance(task, task_file),
        targets=TARGET_KINDS,
        language=guess_language(kernel.source) if kernel is not None else "torch",
        timed_shapes=timed,
        seed_kwarg=SEED_KEY,
        data_arg=True,
        oracle_symbol="check_implementation" if defines(source, "check_implementation") else None,
        support=_support_files(task, folder, task_file, boundary),
        kernel=kernel,
    )


def _problem_folder(path: Path, boundary: str | Path | None) -> tuple[Path, Path]:
    """(the problem's folder, inside the boundary; the boundary), the folder's name held to the safe-name rule."""
    folder = path.parent if path.name == TASK_NAME else path
    if not reader.is_safe_name(folder.name):
        raise KforgeError(f"the problem folder's name {ascii(folder.name)[:40]} is not allowed", path=folder.parent,
                          hint="name it with letters, digits, '.', '_' and '-' (at most 64, starting with a letter "
                               "or digit): it is the kernel's name in every report")
    inside = Path(boundary).resolve() if boundary is not None else reader.checkout_root(folder)
    return reader.resolve_inside(folder, inside), inside


def _check_supported(task: dict[str, Any], task_file: Path) -> None:
    """A Python track, on one device."""
    lang = task.get("lang", "py")
    if lang != "py":
        raise KforgeError(f"lang: {lang!r} problems are not supported (a Python submission defines custom_kernel)",
                          path=task_file, hint="use a problem of a Python track (lang: \"py\")")
    if task.get("multi_gpu") or (isinstance(task.get("gpus"), int) and task["gpus"] > 1):
        raise KforgeError("a multi-GPU problem: kforge-bot evaluates on one device", path=task_file,
                          hint="use a single-GPU problem")


def _tests_and_benchmarks(task: dict[str, Any], task_file: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tests = _keyword_sets(task, "tests", task_file)
    benchmarks = _keyword_sets(task, "benchmarks", task_file, required=False)
    if len(tests) + len(benchmarks) > MAX_SHAPE_SETS:  # as a manifest's shapes: each set is run, checked and timed
        raise KforgeError(f"tests and benchmarks: {len(tests) + len(benchmarks)} keyword sets, at most "
                          f"{MAX_SHAPE_SETS}", path=task_file, hint="keep the sets that matter")
    return tests, benchmarks


def _reference_source(reference_path: Path, boundary: Path) -> str:
    """reference.py's text, once it parses and defines generate_input and ref_kernel (GPU MODE's layout)."""
    source = read_source(reference_path, boundary)
    parse_python(reference_path, source)
    if not defines(source, "ref_kernel") and all(defines(source, s) for s in FORWARD_BACKWARD):
        raise KforgeError("a forward-and-backward problem (generate_inputs, reference_forward, reference_backward, "
                          "its own eval.py) is not read as GPU MODE's layout", path=reference_path,
                          hint="supported: GPU MODE's layout (reference.py with generate_input(**kw) and "
                               "ref_kernel(data)); for a forward with its backward, a kforge.yaml kernel with "
                               "`backward: {inputs: [...]}` (docs/manifest.md)")
    for symbol in ("generate_input", "ref_kernel"):
        if not defines(source, symbol):
            raise KforgeError(f"defines no top-level {symbol!r}", path=reference_path,
                              hint="a GPU MODE reference defines generate_input(**kw) and ref_kernel(data)")
    return source


def candidate_file(spec: KernelSpec, path: str | Path) -> Implementation:
    """A submission for a GPU MODE problem: its `custom_kernel`, importing the problem's modules from its folder."""
    return Implementation.from_file(path, ENTRY, root=spec.root)


def _load_task(task_file: Path, boundary: Path) -> dict[str, Any]:
    data = reader.read_yaml(task_file, boundary)  # bounded and strict, as every file a pull request controls
    if not isinstance(data, dict):
        raise KforgeError("expected a mapping with tests: and benchmarks:", path=task_file,
                          hint="a GPU MODE task.yml lists keyword sets under tests: and benchmarks:")
    return data


def _keyword_sets(task: dict[str, Any], key: str, task_file: Path, required: bool = True) -> list[dict[str, Any]]:
    """`tests` or `benchmarks`: keyword sets for generate_input, each without its seed (the harness owns it)."""
    value = task.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        raise KforgeError(f"{key}: expected a non-empty list of keyword sets ({{size: 1024, seed: 1}})",
                          path=task_file)
    for i, kw in enumerate(value):
        bad = next((k for k in kw if not isinstance(k, str) or not k.isidentifier()), None)
        if bad is not None:
            raise KforgeError(f"{key}[{i}]: {bad!r} is not a keyword argument name", path=task_file)
    return [{k: v for k, v in kw.items() if k != SEED_KEY} for kw in value]


def _tolerance(task: dict[str, Any], task_file: Path) -> dict[str, float] | None:
    """An optional `tolerance: {atol, rtol}` (or top-level atol/rtol) for the harness's elementwise check; GPU MODE's
    own tolerances live in check_implementation, which runs too."""
    given = task.get("tolerance")
    if given is None:
        given = {k: task[k] for k in ("atol", "rtol") if k in task} or None
    if given is None:
        return None
    if not isinstance(given, dict) or not given or set(given) - {"atol", "rtol"} or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in given.values()):
        raise KforgeError("tolerance: expected {atol: number, rtol: number} with values >= 0", path=task_file)
    return {k: float(v) for k, v in given.items()}


def _support_files(task: dict[str, Any], folder: Path, task_file: Path,
                   boundary: Path) -> tuple[tuple[str, str], ...]:
    """The modules `files:` names (their task.py and utils.py), read from where it says; without `files:`, the
    folder's task.py and utils.py. The submission, the reference (imported from the folder) and the evaluator
    (config.main: kforge-bot is the evaluator) are not among them."""
    main = (task.get("config") or {}).get("main") if isinstance(task.get("config"), dict) else None
    entries = task.get("files")
    if entries is None:
        entries = [{"name": n, "source": n} for n in ("task.py", "utils.py") if (folder / n).is_file()]
    if not isinstance(entries, list):
        raise KforgeError("files: expected a list of {name, source}", path=task_file)
    if len(entries) > MAX_SUPPORT_FILES:
        raise KforgeError(f"files: {len(entries)} entries, at most {MAX_SUPPORT_FILES}", path=task_file,
                          hint="list the problem's own modules (task.py, utils.py)")
    found: list[tuple[str, str]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
                or not isinstance(entry.get("source"), str):
            raise KforgeError(f"files[{i}]: expected {{name: file, source: path}}", path=task_file)
        name, source = entry["name"], entry["source"]
        if source == _SUBMISSION_SOURCE or name in (REFERENCE, SUBMISSION, main) or not name.endswith(".py"):
            continue
        if "/" in name or not name[:-3].isidentifier():
            raise KforgeError(f"files[{i}].name: {name!r} is not a module file name", path=task_file)
        if Path(source).is_absolute():
            raise KforgeError(f"files[{i}].source: {source!r} must be relative to the problem's folder",
                              path=task_file)
        found.append((name, reader.read_text(folder / source, boundary, named_in=task_file,
                                             key=f"files[{i}].source")))
    return tuple(found)
