"""Guards the worker installs while the candidate's own code runs: who started a thread, who asks for a frame.

- `ThreadWatch`: Python threads started by the candidate's code, so none may outlive a call.
- `AuditGuard`: an audit hook that refuses the candidate's code frames and the garbage collector's view of all
  objects (the static scan, kforge_bot.evaluate.static_scan, stops only the plain spellings).
- `hooks_and_modes_left`: global module hooks and torch function or dispatch modes a candidate left installed.

The snapshot of the framework's functions and settings, compared after each phase, is
kforge_bot.evaluate.worker.snapshot.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
from typing import Any

import torch
from torch.nn.modules import module as _module_hooks


def _stdlib_test() -> Any:
    """A predicate: is this code file part of Python's standard library (not site-packages)?"""
    paths = sysconfig.get_paths()
    stdlib = os.path.join(paths["stdlib"], "")
    installed = tuple(os.path.join(paths[k], "") for k in ("purelib", "platlib"))

    def is_stdlib(filename: str) -> bool:
        return filename.startswith("<frozen") or (filename.startswith(stdlib) and not filename.startswith(installed))

    return is_stdlib


# ----------------------------------------------------------------------------------------- threads


class ThreadWatch:
    """Python threads started by the candidate's own code, so none may outlive a call.

    On the CPU a thread is what a side stream is on a GPU: a forward that hands its work to a thread and
    returns at once is timed as instant, and its output fills in later. Threads count as the candidate's
    when the nearest caller outside the standard library (which holds Thread and the thread pools) is
    the candidate's source file; threads the framework starts for itself are not its business.
    """

    def __init__(self, candidate_dir_prefix: str) -> None:
        self._prefix = candidate_dir_prefix
        self._is_stdlib = _stdlib_test()
        self._threading = threading
        # The standard library's own is_alive, and what a subclass may redefine without being asked about: a
        # thread class of the candidate's answers for itself otherwise (an is_alive() that waits for the work
        # and says no makes the harness wait for it, after the timed region).
        self._is_alive = threading.Thread.is_alive
        self._machinery = frozenset(vars(threading.Thread)) - {"run", "__init__", "__repr__", "__doc__",
                                                                 "__module__", "__dict__", "__weakref__"}
        self.started: list[Any] = []

    def install(self) -> None:
        watch = self
        original = self._threading.Thread.start

        def start(thread: Any) -> None:
            if watch._started_by_candidate():
                watch.started.append(thread)
            original(thread)

        start.__wrapped__ = original  # type: ignore[attr-defined]
        self._threading.Thread.start = start  # type: ignore[method-assign]

    def _started_by_candidate(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if not self._is_stdlib(filename):
                return filename.startswith(self._prefix)
            frame = frame.f_back
        return False

    def running(self) -> list[str]:
        """Names of candidate threads still alive, and of those whose class redefines how a thread says so."""
        names = []
        for thread in self.started:
            kind = type(thread)
            redefined = sorted({name for k in kind.__mro__[:kind.__mro__.index(self._threading.Thread)]
                                for name in vars(k)} & self._machinery)
            if redefined:
                names.append(f"{kind.__name__}, whose class redefines {', '.join(redefined[:3])}")
            elif self._is_alive(thread):
                names.append(str(self._threading.Thread.__dict__["name"].fget(thread)))
        return names


# -------------------------------------------------------------------------------- frames and the gc

# Every way Python hands out a frame or someone else's objects raises one of these audit events (PEP 578);
# f_back and f_locals need a first frame, and that comes from one of them.
_AUDITED_CALLS = {"sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "gc.get_objects",
                  "gc.get_referrers", "gc.get_referents"}
_AUDITED_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
# Standard-library functions that return frames to their caller (others use frames internally only,
# e.g. collections.namedtuple reading its caller's module name, and stay allowed).
_FRAME_GIVERS = {("inspect", "currentframe"), ("inspect", "stack"), ("inspect", "trace"),
                 ("inspect", "getouterframes"), ("inspect", "getinnerframes"), ("traceback", "walk_stack"),
                 ("traceback", "walk_tb")}


class AuditGuard:
    """Blocks the candidate's code from reaching frames or the garbage collector's view of all objects.

    With a frame, a candidate can rewrite the harness's timing lists or read the result channel's nonce;
    with gc.get_objects, find any tensor it likes. The static scan stops the plain spellings; names built
    at run time get past any scan, but not the interpreter's audit hook, which cannot be removed once
    added. An operation is refused (the candidate gets an exception) and remembered (the verdict) when
    the code asking is the candidate's own, directly or through a standard-library function that hands
    frames out. The harness and the framework keep using frames as they like.
    """

    def __init__(self, candidate_dir_prefix: str) -> None:
        self._prefix = candidate_dir_prefix
        self._is_stdlib = _stdlib_test()
        self._local = threading.local()  # per thread: another thread cannot slip through while one is inside
        self.refused: list[str] = []

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "object.__getattr__":
            if len(args) < 2 or args[1] not in _AUDITED_ATTRIBUTES:
                return
            what = f".{args[1]}"
        elif event in _AUDITED_CALLS:
            what = f"{event}()"
        else:
            return
        if getattr(self._local, "busy", False):
            return  # our own sys._getframe below
        self._local.busy = True
        try:
            reason = self._refusal(sys._getframe(1), event)
        finally:
            self._local.busy = False
        if reason:
            message = f"{what} {reason}"
            self.refused.append(message)
            raise PermissionError(f"kforge-bot: refused {message}")

    def _refusal(self, frame: Any, event: str) -> str | None:
        first = frame
        givers = []
        while frame is not None and self._is_stdlib(frame.f_code.co_filename):
            module = os.path.splitext(os.path.basename(frame.f_code.co_filename))[0]
            givers.append((module, frame.f_code.co_name))
            frame = frame.f_back
        if frame is None or not frame.f_code.co_filename.startswith(self._prefix):
            return None  # the harness's or the framework's own business
        line = f"(candidate line {frame.f_lineno})"
        if frame is first or event not in ("sys._getframe", "object.__getattr__"):
            return line
        given = next((g for g in givers if g in _FRAME_GIVERS), None)
        return f"through {given[0]}.{given[1]}() {line}" if given else None


# ------------------------------------------------------------------------ hooks and modes left behind

_function_modes = torch._C._len_torch_function_stack  # bound at import, before any candidate
_dispatch_modes = torch._C._len_torch_dispatch_stack
_HOOK_TABLES = tuple(sorted(name for name, value in vars(_module_hooks).items()
                            if name.startswith("_global_") and isinstance(value, dict)))


def hooks_and_modes_left() -> list[str]:
    """What runs inside every module call or torch function besides the module's own work: global module hooks
    (`register_module_forward_hook` and kin) and torch function or dispatch modes left on their stacks. The
    harness uses none between calls, so any the candidate left would run inside the baseline's calls too (on the
    dev VM a forward hook turned an honest 0.545x into a 1.41x pass, a function mode into 1.15x)."""
    found = [f"torch.nn.modules.module.{name} ({len(table)})" for name in _HOOK_TABLES
             if (table := getattr(_module_hooks, name, None)) is not None and len(table)]
    if _function_modes():
        found.append(f"a torch function mode ({_function_modes()} on the stack)")
    if _dispatch_modes():
        found.append(f"a torch dispatch mode ({_dispatch_modes()} on the stack)")
    return found
