"""Compile-ahead: a candidate that builds a torch extension at import is first imported on the host's CPU
cores, in a sandboxed child that sees no GPU, so its build is done before a slot takes it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kforge_bot.environment import scrubbed_environment
from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.wire.limits import limits_for
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.sandbox import kill_group, sandbox_view
from kforge_bot.evaluate.scratch import remove_scratch

PREPARE_TIMEOUT_S = 900.0


def needs_build(source: str) -> bool:
    """A source that builds a torch extension when imported: worth compiling ahead on the CPU."""
    return "load_inline" in source or "cpp_extension" in source


_PREPARE = r"""
import json, sys
from pathlib import Path
from kforge_bot.kernelspec import Implementation
from kforge_bot.evaluate.wire import limits
from kforge_bot.evaluate.worker import importing
work = Path(sys.argv[1])
request = json.loads(sys.stdin.read())
limits.apply(limits.Limits.from_dict(request["limits"]))  # before any user code, as in a worker
for tag, impl in request["imports"]:
    importing.import_implementation(Implementation.from_dict(impl), work, tag)
print("KFORGE_PREPARED", flush=True)
"""


def candidate_imports(spec: Any, candidate: Any, baseline: Any) -> list[tuple[str, Any]]:
    """What a candidate's worker imports, in its order (kforge_bot.evaluate.worker.candidate_role.CandidateRun.setup):
    extension versions (name, name_v1, ...) follow the order, and a build is found again only under its name."""
    base = baseline or spec.baseline
    imports = [("inputs", spec.inputs_source), ("baseline", base)]
    if base.to_dict() != spec.reference.to_dict():
        imports.append(("reference", spec.reference))
    return imports + [("candidate", candidate)]


def kernel_as_written_steps(spec: Any, baseline: Any) -> list[list[tuple[str, Any]]]:
    """The children that build the kernel as written, its reference and inputs: one per source that builds,
    each importing only what every worker that loads that source imports before it (the inputs, then the
    source), so no source's code runs in the child whose build another source's worker loads."""
    inputs, base, reference = spec.inputs_source, baseline or spec.baseline, spec.reference
    steps: list[list[tuple[str, Any]]] = []
    done: set[str] = set()
    for imports in ([("inputs", inputs)], [("inputs", inputs), ("reference", reference)],
                    [("inputs", inputs), ("baseline", base)]):
        impl = imports[-1][1]
        if impl.digest not in done and needs_build(impl.source):
            steps.append(imports)
        done.add(impl.digest)
    return steps


def prepare_build(spec: Any, imports: list[tuple[str, Any]], env: dict[str, str], timeout_s: float,
                  settings: Any = None) -> tuple[str, float]:
    """Import `imports` ((tag, Implementation) pairs, in a worker's order) in a sandboxed child that sees no
    GPU, so the last one's extension builds are made before a worker needs them. Returns (status, seconds);
    a failure is only noted: the slot's evaluation then meets the compile error and reports it itself.

    Inside the OS sandbox the child writes no shared folder: it builds in its own (isolation.EXTENSIONS_MOUNT,
    the path every sandboxed worker builds and loads at, so ninja finds the build current there), and once it
    has succeeded the bot publishes the build of the last source alone, the one this child was for: no source's
    code can plant a build that another source's import would load. Unsandboxed, the child writes the shared
    folders itself (isolation off trusts the machine)."""
    started = time.monotonic()
    root = Path(env["KFORGE_EXTENSIONS_ROOT"])
    # Beside the shared folders, on their filesystem: publishing is a rename, never a copy of what a child made.
    work = Path(tempfile.mkdtemp(prefix="kforge-prepare-", dir=root.parent))
    child_env = scrubbed_environment({**os.environ, **env})
    argv = [sys.executable, "-c", _PREPARE, str(work)]
    try:
        settings = settings or EvalSettings()
        view = sandbox_view(spec, [impl for _tag, impl in imports], "cpu", work, settings)
        payload = json.dumps({"limits": limits_for(settings, "cpu", view is not None, str(root.parent)).to_dict(),
                              "imports": [[tag, impl.to_dict()] for tag, impl in imports]})
        if view is not None:
            view = replace(view, readable=view.readable + (root,))
            child_env = isolation.environment(child_env, view)
            argv = isolation.command(argv, view)
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=child_env, cwd=str(work), start_new_session=True)
        try:
            out, _ = proc.communicate(payload.encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.communicate()
            return f"failed: timed out after {timeout_s:.0f} s", time.monotonic() - started
        finally:
            kill_group(proc)  # a compiler or stray thread left behind goes with its group
        text = out.decode("utf-8", errors="replace")
        if "KFORGE_PREPARED" in text:
            if view is not None:
                publish(work, imports[-1][1].digest, root)
            return "built", time.monotonic() - started
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
        return f"failed: {tail[0][:300]}", time.monotonic() - started
    except OSError as exc:
        return f"failed: {exc}", time.monotonic() - started
    finally:
        remove_scratch(work)


def publish(work: Path, digest: str, root: Path) -> None:
    """Move `digest`'s build folder from a finished child's extensions folder (isolation.extensions_folder) to
    `root`, unless a build is there already (an earlier child's, which workers may be copying now). The child
    could replace any folder of its scratch with a link: each step is opened without following links, so
    nothing outside its folder is moved."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    relative = isolation.extensions_folder(Path(".")).parts
    fd = -1
    try:
        fd = os.open(work, flags)
        for part in relative:
            inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
        if not stat.S_ISDIR(os.stat(digest, dir_fd=fd, follow_symlinks=False).st_mode):
            return
        # Atomic: workers see all of it or none; an empty folder is replaced, a build kept (ENOTEMPTY).
        os.rename(digest, root / digest, src_dir_fd=fd)
    except OSError:
        return  # nothing built, a link in the way, or a build published already: workers build for themselves
    finally:
        if fd >= 0:
            os.close(fd)

