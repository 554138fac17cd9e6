"""Every file inside a checkout that a kernel can read: the one function behind the gate's "changed" check, the
PR bot's changed kernels and the result cache's key (kforge_bot.cache).

Followed from the kernel's files (and its reference's and inputs'), transitively:
- `import` statements (anywhere in a file, also inside functions) that load a file through the kernel's import
  roots (the folders that go on `sys.path`), or through a relative import inside a package;
- string literals that name an existing file (`load(sources=["k.cu"])`, `open("w.bin")`, `np.load("x.npy")`,
  `Path(__file__).parent / "x.bin"`), looked up beside the file, under the import roots and the checkout's root;
- quoted `#include "..."` lines, in C/C++/CUDA files and in the source strings a Python file builds inline,
  resolved against the including file's folder and the include folders the kernel builds with (`-I` flags and
  `extra_include_paths` entries, literal); `#include <...>` lines against those include folders alone (a
  header of the checkout found through `-I`; one found nowhere in it is the system's or the toolkit's);
- what cannot be resolved statically counts as the whole folder of the file that does it (all files below it),
  or the whole checkout where the file builds paths above its folder (`..`, `os.pardir`, nested `dirname`/`parent`);
  a module imported by a name made at run time (`importlib.import_module(name)`, `__import__(name)`) counts as
  every file under the import roots:
  a file read by a path computed at run time (`open(name)`, `torch.load(path)`, `Path(name).read_text()`), an
  include folder or a build source that is not a literal, an `#include` of a macro, and an edit of `sys.path`
  (`sys.path.insert(0, folder)`: what the file imports afterwards may come from any folder it names).
Nothing outside the checkout counts (installed packages, system headers), and a symlink counts where it points.
Files are read through kforge_bot.config.reader (inside the checkout, regular files, bounded).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError

_C_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".cl", ".metal", ".sycl", ".inl",
               ".inc")
_STRING_PATH = re.compile(r"^[\w.\-/]+$")
_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)
_ANGLE_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*<([^>\n]+)>', re.MULTILINE)
_MACRO_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[A-Za-z_]", re.MULTILINE)
# Calls that read a file by the path they are given (a method of that name on anything: np.load, torch.load,
# cpp_extension.load, Path.read_bytes, ...). Modules whose `load` takes an open file, already followed, are not.
# Loaders of a module from a file whose path is their second argument (after the module's name).
_PATH_SECOND = {"spec_from_file_location", "SourceFileLoader", "SourcelessFileLoader", "ExtensionFileLoader"}
_READERS = {"open", "load", "fromfile", "loadtxt", "genfromtxt", "memmap", "read_text", "read_bytes", "read_csv",
            "safe_open", "load_file", "imread", "load_inline", "run_path",
            "CDLL", "PyDLL", "LoadLibrary", "load_library"} | _PATH_SECOND  # shared libraries loaded from a file too
# Calls that import a module by the name they are given (a literal is followed like an `import`).
_IMPORTERS = {"import_module", "__import__", "run_module"}
_FILE_OBJECT_MODULES = {"json", "pickle", "yaml", "marshal", "tomllib", "csv"}
# Keyword arguments that name files or folders a build reads.
_BUILD_KEYWORDS = {"sources", "extra_include_paths", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
                   "file", "fname", "f", "path", "filename"}
# The one list of a checkout's folders that hold no kernel's input: git's and kforge-bot's own state, bytecode,
# environments and tools' caches (the gate and the PR bot read committed files only; a working tree's virtual
# environment would cost seconds to hash).
NOT_INPUT_FOLDERS = frozenset({".git", ".kforge-cache", "__pycache__", ".venv", "venv", "node_modules", ".tox", ".nox",
                               ".mypy_cache", ".pytest_cache"})
# ... and build outputs: where no managed kernel is looked for (a kernel may still read a file there).
NO_KERNEL_FOLDERS = NOT_INPUT_FOLDERS | {"build", "dist"}
_MAX_LITERAL = 300


def _module_files(dotted: str, root: Path) -> list[Path]:
    """Files that `import dotted` executes when `root` is on sys.path: each package's __init__ and
    the module itself. Empty when the module's top-level package is not under `root`."""
    parts = dotted.split(".")
    found: list[Path] = []
    folder = root
    for i, part in enumerate(parts):
        if not part:
            return found
        last = i == len(parts) - 1
        package = folder / part
        module = folder / f"{part}.py"
        if package.is_dir():
            init = package / "__init__.py"
            if init.is_file():
                found.append(init)
            folder = package  # a namespace package (no __init__) still resolves submodules
            continue
        if last and module.is_file():
            found.append(module)
        break  # a module file ends the chain; `a.b` with a.py found means b is an attribute
    return found


def _package_dir(file: Path, level: int) -> Path:
    folder = file.parent
    for _ in range(level - 1):
        folder = folder.parent
    return folder


def whole_folder(folder: Path) -> set[Path]:
    """Every file below `folder` (what a read that cannot be resolved statically may reach)."""
    found: set[Path] = set()
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in NOT_INPUT_FOLDERS)
        found.update(Path(parent) / f for f in files)
    return found


class _Scan:
    """What one Python file reads: modules it imports, literals that may name files, include folders it builds
    with, inline sources' includes, and whether it reads something no literal names."""

    def __init__(self) -> None:
        self.modules: list[tuple[str, Path | None]] = []  # (dotted name, explicit base folder of a relative import)
        self.literals: list[str] = []
        self.include_dirs: list[str] = []
        self.inline_includes: list[str] = []
        self.inline_angle_includes: list[str] = []  # `#include <...>`: found through the include folders only
        self.reads: list[list[str]] = []  # per file-reading call: the literal names its path may be
        self.dynamic = False
        self.imports_by_name = False
        self.climbs = False  # builds a path above its own folder (`..`, os.pardir, dirname(dirname(...)))


def _literal_strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _has_path_literal(node: ast.AST) -> bool:
    return any(_looks_like_path(s) for s in _literal_strings(node))


def _path_names(node: ast.AST) -> list[str]:
    """What a path expression may name: each literal in it, and its literals joined (`join(d, "data", "w.bin")`,
    `Path(__file__).parent / "data" / "w.bin"`)."""
    parts = [s for s in _literal_strings(node) if _looks_like_path(s)]
    return parts + (["/".join(parts)] if len(parts) > 1 else [])


def _writes(node: ast.Call) -> bool:
    mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(set(mode.value) & set("wax"))


def _looks_like_path(text: str) -> bool:
    return 0 < len(text) < _MAX_LITERAL and bool(_STRING_PATH.match(text)) and text not in (".", "..")


def _callee(node: ast.Call) -> tuple[str, str]:
    """(name, receiver): `np.load` -> ("load", "np"), `open` -> ("open", "")."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id, ""
    if isinstance(func, ast.Attribute):
        receiver = func.value.id if isinstance(func.value, ast.Name) else ""
        return func.attr, receiver
    return "", ""


def _scan_call(node: ast.Call, scan: _Scan) -> None:
    name, receiver = _callee(node)
    for keyword in node.keywords:
        if keyword.arg == "extra_include_paths":
            values = _literal_strings(keyword.value)
            scan.include_dirs.extend(values)
            if not values or not isinstance(keyword.value, (ast.List, ast.Tuple)) or not all(
                    isinstance(e, ast.Constant) for e in keyword.value.elts):
                scan.dynamic = True  # an include folder computed at run time
        elif keyword.arg in ("extra_cflags", "extra_cuda_cflags"):
            scan.include_dirs.extend(include_flags(_literal_strings(keyword.value)))
            if not isinstance(keyword.value, (ast.List, ast.Tuple)) or not all(
                    isinstance(e, ast.Constant) for e in keyword.value.elts):
                scan.dynamic = True
        elif keyword.arg == "sources" and not _has_path_literal(keyword.value):
            scan.dynamic = True
    if name in _IMPORTERS:
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
            scan.modules.append((first.value, None))
        else:
            scan.imports_by_name = True  # a module named at run time: any module under the import roots
        return
    if name not in _READERS or receiver in _FILE_OBJECT_MODULES:
        return
    if name == "load_inline":
        return  # its sources are strings in the file (their includes are followed); its folders are above
    if name == "open" and _writes(node):
        return  # a file it writes (into its scratch, if anywhere), not one it reads
    if isinstance(node.func, ast.Attribute) and name in ("read_text", "read_bytes", "open") and not node.args:
        # `Path(...).read_text()`, `path.open()`: the path is the receiver; with no literal in it, made at run time
        target: ast.AST | None = node.func.value
    elif name in _PATH_SECOND:  # (name, location) or (fullname, path)
        target = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg in ("location", "path")), None)
    else:
        target = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg in _BUILD_KEYWORDS), None)
    names = _path_names(target) if target is not None else []
    if names:
        scan.reads.append(names)
    else:
        scan.dynamic = True  # a file read by a path computed at run time


def include_flags(flags: Sequence[str]) -> list[str]:
    """The folders compiler flags add to the include search: `-Idir`, `-I dir`, `-isystem dir`, `-iquote dir`."""
    found = []
    for i, flag in enumerate(flags):
        if flag.startswith("-I") and len(flag) > 2:
            found.append(flag[2:])
        elif flag in ("-I", "-isystem", "-iquote", "-idirafter") and i + 1 < len(flags):
            found.append(flags[i + 1])
    return found


def _edits_sys_path(node: ast.AST) -> bool:
    """`sys.path.insert(...)`, `.append`, `.extend`, `sys.path[:0] = ...`, `sys.path += ...`, `sys.path = ...`."""
    def is_sys_path(n: ast.AST) -> bool:
        n = n.value if isinstance(n, ast.Subscript) else n
        return isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) \
            and n.value.id == "sys"

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("insert", "append", "extend") and is_sys_path(node.func.value)
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(is_sys_path(t) for t in targets)
    return False


def _scan_python(source: str, file: Path) -> _Scan | None:
    try:
        tree = ast.parse(source, filename=str(file))
    except (SyntaxError, ValueError):
        return None
    scan = _Scan()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            scan.modules.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _package_dir(file, node.level) if node.level else None
            module = node.module or ""
            if module:
                scan.modules.append((module, base))
            for alias in node.names:
                if alias.name != "*":
                    scan.modules.append((f"{module}.{alias.name}" if module else alias.name, base))
        elif isinstance(node, ast.Call):
            _scan_call(node, scan)
            scan.imports_by_name = scan.imports_by_name or _edits_sys_path(node)
            scan.climbs = scan.climbs or _callee(node)[0] == "dirname" and any(
                isinstance(a, ast.Call) and _callee(a)[0] == "dirname" for a in node.args)
        elif isinstance(node, (ast.Assign, ast.AugAssign)) and _edits_sys_path(node):
            scan.imports_by_name = True  # what it imports next may come from any folder
        if isinstance(node, ast.Attribute):
            scan.climbs = scan.climbs or node.attr in ("pardir", "parents") or (
                node.attr == "parent" and isinstance(node.value, ast.Attribute) and node.value.attr == "parent")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            scan.climbs = scan.climbs or ".." in text.split("/")
            if _looks_like_path(text):
                scan.literals.append(text)
            elif "#" in text and "include" in text:  # an inline C/C++/CUDA source
                scan.inline_includes.extend(_QUOTED_INCLUDE.findall(text))
                scan.inline_angle_includes.extend(_ANGLE_INCLUDE.findall(text))
                scan.dynamic = scan.dynamic or bool(_MACRO_INCLUDE.search(text))
    return scan


def _first_existing(name: str, folders: Iterable[Path]) -> Path | None:
    for folder in folders:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def _python_dependencies(file: Path, import_roots: Sequence[Path], repo_root: Path,
                         include_dirs: set[Path]) -> set[Path]:
    try:
        scan = _scan_python(reader.read_text(file, repo_root), file)
    except KforgeError:
        return set()  # outside the checkout, not a regular file, too large or not text
    if scan is None:
        return set()  # a file that does not parse has no imports to follow; its own hash still changes
    found: set[Path] = set()
    for dotted, base in scan.modules:
        for root in ([base] if base is not None else list(import_roots)):
            found.update(_module_files(dotted, root))
    folders = (file.parent, *import_roots, repo_root)
    for text in scan.literals:
        hit = _first_existing(text, folders)
        if hit is not None:
            found.add(hit)
    dynamic = scan.dynamic
    for names in scan.reads:  # a read whose literals name no file in the checkout: its path is made at run time
        hits = [hit for hit in (_first_existing(n, folders) for n in names) if hit is not None]
        found.update(hits)
        dynamic = dynamic or not hits
    for text in scan.include_dirs:
        for folder in (file.parent, *import_roots, repo_root):
            if (folder / text).is_dir():
                include_dirs.add((folder / text).resolve())
                break
    found.update(_includes(scan.inline_includes, scan.inline_angle_includes, file, include_dirs))
    if dynamic:  # a path made at run time that climbs above its folder may reach any file of the checkout
        found.update(whole_folder(repo_root if scan.climbs else file.parent))
    if scan.imports_by_name:  # a module named at run time, or sys.path edited: its folder too (above, if it climbs)
        for root in import_roots:
            found.update(whole_folder(root))
        found.update(whole_folder(repo_root if scan.climbs else file.parent))
    return found


def _includes(quoted: Iterable[str], angled: Iterable[str], file: Path, include_dirs: set[Path]) -> set[Path]:
    """The checkout's headers that `#include "..."` (beside `file`, then the include folders) and `#include <...>`
    (the include folders only) name; one found nowhere in them is the system's or the toolkit's."""
    folders = sorted(include_dirs)
    hits = [_first_existing(n, (file.parent, *folders)) for n in quoted]
    hits += [_first_existing(n, folders) for n in angled]
    return {hit for hit in hits if hit is not None}


def _c_dependencies(file: Path, repo_root: Path, include_dirs: set[Path]) -> set[Path]:
    try:
        text = reader.read_bytes(file, repo_root).decode("utf-8", errors="replace")
    except KforgeError:
        return set()
    found = _includes(_QUOTED_INCLUDE.findall(text), _ANGLE_INCLUDE.findall(text), file, include_dirs)
    if _MACRO_INCLUDE.search(text):
        found.update(whole_folder(file.parent))  # `#include SOME_MACRO`: the preprocessor decides
    return found


def direct_dependencies(file: Path, import_roots: Sequence[Path], repo_root: Path,
                        include_dirs: set[Path] | None = None) -> set[Path]:
    """Files inside `repo_root` that `file` imports, includes or names directly (not transitively).
    `include_dirs` collects the include folders a Python file builds with, and resolves a C file's includes."""
    include_dirs = set() if include_dirs is None else include_dirs
    if file.suffix == ".py":
        found = _python_dependencies(file, import_roots, repo_root, include_dirs)
    elif file.suffix in _C_SUFFIXES:
        found = _c_dependencies(file, repo_root, include_dirs)
    else:
        return set()
    resolved = {reader.real_path(p) for p in found}  # a committed link loop stays a path (never read), no crash
    return {p for p in resolved if p.is_relative_to(repo_root) and p != reader.real_path(file)}


def local_closure(files: Iterable[Path], import_roots: Sequence[Path], repo_root: Path) -> list[Path]:
    """`files` and every file inside `repo_root` they can read, transitively; sorted, resolved paths."""
    repo_root = repo_root.resolve()
    roots = [Path(r).resolve() for r in import_roots]
    include_dirs: set[Path] = set()
    seen: set[Path] = set()
    todo = [reader.real_path(f) for f in files]
    while True:
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            if path.is_file():
                todo.extend(direct_dependencies(path, roots, repo_root, include_dirs) - seen)
        # An include folder found late (in a file read after a C file): read every C file again with it.
        known = len(include_dirs)
        again = {dep for path in seen if path.suffix in _C_SUFFIXES and path.is_file()
                 for dep in direct_dependencies(path, roots, repo_root, include_dirs)} - seen
        if not again and len(include_dirs) == known:
            return sorted(seen)
        todo = list(again)
