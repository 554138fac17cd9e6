"""KernelBench problems: a module with `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`, found by
itself (no manifest); candidates define `class ModelNew` with the same constructor and forward."""

from __future__ import annotations

from pathlib import Path

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec.model import TARGET_KINDS, Implementation, KernelSpec
from kforge_bot.kernelspec.source import guess_language, parse_python, read_source, top_level_names


def load_kernelbench(path: str | Path) -> KernelSpec:
    path = Path(path).resolve()
    source = read_source(path)
    names = top_level_names(parse_python(path, source))
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise KforgeError(f"not a KernelBench problem: missing {', '.join(missing)}", path=path,
                          hint="define class Model(nn.Module), get_inputs() and get_init_inputs()")
    reference = Implementation(source=source, symbol="Model", filename=path.name, root=str(path.parent))
    return KernelSpec(
        name=path.stem,
        format="kernelbench",
        root=str(path.parent),
        kernel_file=path.name,
        entry="ModelNew",
        reference=reference,
        baseline=reference,
        inputs_symbol="get_inputs",
        inputs_source=reference,
        init_symbol="get_init_inputs",
        targets=TARGET_KINDS,
        language=guess_language(source),
    )
