"""Compile-ahead: a candidate that builds a torch extension at import is first imported on the host's CPU
cores, in a sandboxed child that sees no GPU, so its build is done before a slot takes it."""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.evaluate.sandbox import sandbox_view, scrubbed_environment

PREPARE_TIMEOUT_S = 900.0


def needs_build(source: str) -> bool:
    """A source that builds a torch extension when imported: worth compiling ahead on the CPU."""
    return "load_inline" in source or "cpp_extension" in source


_PREPARE = r"""
import json, sys
from pathlib import Path
from kforge_bot.spec import Implementation, KernelSpec
from kforge_bot.evaluate import loading
data = json.loads(sys.stdin.read())
spec = KernelSpec.from_dict(data["spec"])
baseline = Implementation.from_dict(data["baseline"]) if data["baseline"] else spec.baseline
work = Path(sys.argv[1])
# The candidate worker's own import order (kforge_bot.evaluate.candidate_role.CandidateRun): extension versions
# (name, name_v1, ...) follow it, and a build is found again only under the same name.
loading.import_implementation(spec.inputs_source, work, "inputs")
loading.import_implementation(baseline, work, "baseline")
loading.import_implementation(spec.reference, work, "reference")
if data["candidate"]:
    loading.import_implementation(Implementation.from_dict(data["candidate"]), work, "candidate")
print("KFORGE_PREPARED", flush=True)
"""


def prepare_build(spec: Any, candidate: Any, baseline: Any, env: dict[str, str], timeout_s: float,
                  settings: Any = None) -> tuple[str, float]:
    """Import the candidate (after the kernel as written, as the worker does) in a sandboxed child that sees
    no GPU, so its extension builds land in the shared per-source folders. Returns (status, seconds); a
    failure is only noted: the slot's evaluation then meets the compile error and reports it itself.

    With `candidate` None, the kernel as written, its reference and inputs are built instead. Inside the OS
    sandbox the child writes no shared folder: it builds in its own (isolation.EXTENSIONS_MOUNT, the path every
    sandboxed worker builds and loads at, so ninja finds the build current there), and the bot publishes the
    folders of the sources it prepares (the candidate's, or those three) once it has succeeded: no source's
    code can plant a build that another source's import would load."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="kforge-prepare-"))
    payload = json.dumps({"spec": spec.to_dict(), "candidate": candidate.to_dict() if candidate else None,
                          "baseline": baseline.to_dict() if baseline is not None else None})
    child_env = scrubbed_environment({**os.environ, **env})
    argv = [sys.executable, "-c", _PREPARE, str(work)]
    try:
        root = Path(env["KFORGE_EXTENSIONS_ROOT"])
        own = [candidate] if candidate else [spec.inputs_source, baseline or spec.baseline, spec.reference]
        view = sandbox_view(spec, [candidate, baseline], "cpu", work, settings or EvalSettings())
        if view is not None:
            view = replace(view, readable=view.readable + (root,))
            child_env = isolation.environment(child_env, view)
            argv = isolation.command(argv, view)
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=child_env, cwd=str(work), start_new_session=True)
        try:
            out, _ = proc.communicate(payload.encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _killpg(proc)
            proc.communicate()
            return f"failed: timed out after {timeout_s:.0f} s", time.monotonic() - started
        finally:
            _killpg(proc)  # a compiler or stray thread left behind goes with its group
        text = out.decode("utf-8", errors="replace")
        if "KFORGE_PREPARED" in text:
            if view is not None:
                for digest in {impl.digest for impl in own}:
                    publish(isolation.extensions_folder(work) / digest, root / digest)
            return "built", time.monotonic() - started
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
        return f"failed: {tail[0][:300]}", time.monotonic() - started
    except OSError as exc:
        return f"failed: {exc}", time.monotonic() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)


def publish(built: Path, shared: Path) -> None:
    """Move a sandboxed child's build folder into the shared place, unless a build is there already (an earlier
    child's, which processes may be copying now). The child is gone: nothing writes `built` any more."""
    if built.is_symlink() or not built.is_dir():
        return
    try:
        os.rename(built, shared)  # atomic: readers see all of it or none; an empty folder is replaced, a build kept
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            return
        staging = shared.with_name(f"{shared.name}.{os.getpid()}.{secrets.token_hex(4)}")
        shutil.copytree(built, staging, symlinks=True)
        try:
            os.rename(staging, shared)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

