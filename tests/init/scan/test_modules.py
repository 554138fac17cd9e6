"""A repository's modules read as text, and names resolved across them (kforge_bot.init.scan.modules)."""

from __future__ import annotations

from kforge_bot.init.scan.modules import Library, dotted_name, parse_module


def _library(files: dict[str, str]) -> Library:
    modules = [parse_module(rel, text) for rel, text in files.items()]
    return Library(m for m in modules if m is not None)


def test_dotted_names_drop_src_and_init() -> None:
    assert dotted_name("src/pkg/ops/rms.py") == "pkg.ops.rms"
    assert dotted_name("pkg/ops/__init__.py") == "pkg.ops"
    assert dotted_name("src.py") == "src"


def test_names_resolve_through_relative_imports_reexports_aliases_and_stars() -> None:
    library = _library({
        "src/pkg/__init__.py": "from .ops import *\n",
        "src/pkg/ops/__init__.py": "from .rms import rms_norm as rms\n",
        "src/pkg/ops/rms.py": "def rms_norm(x):\n    return x\n",
        "src/pkg/api.py": "import pkg.ops.rms as r\nfrom . import ops\nfrom pkg import rms\nfrom ..outside import z\n",
        "broken.py": "def (:\n",
    })
    api = library.by_rel["src/pkg/api.py"]
    target = ("src/pkg/ops/rms.py", "rms_norm")
    assert library.resolve(api, "rms").key == target  # pkg/__init__ star-imports ops, which re-exports it
    import ast

    assert library.resolve_expr(api, ast.parse("r.rms_norm", mode="eval").body).key == target
    assert library.resolve_expr(api, ast.parse("ops.rms", mode="eval").body).key == target
    assert library.resolve(api, "z") is None and library.resolve(api, "nothing") is None
    assert "broken.py" not in library.by_rel
    # A module imported under the name it has in an installed package, found by its suffix.
    assert library.find_module("ops.rms") is library.by_rel["src/pkg/ops/rms.py"]


def test_definitions_inside_top_level_if_and_try_count() -> None:
    module = parse_module("k.py", "try:\n    import triton\nexcept ImportError:\n    triton = None\n"
                                  "if triton is not None:\n    kernel = triton.jit(f)\n")
    assert module is not None and "kernel" in module.defs and module.imports["triton"] == ("triton", None)
