"""The OS sandbox that every process running user code starts in: bubblewrap (Flatpak's sandbox tool).

User code is a generated kernel, a pull request's kernel, its reference and its input generator: any of
them may be hostile. Inside the sandbox a process has
- its own user, PID, mount, IPC, UTS and network namespaces: it cannot see, read (`/proc/<pid>/environ`,
  `/proc/<pid>/mem`), trace or signal the bot or any other worker; it has no network; every process it
  starts dies with it (the namespace's init is killed when the worker ends, daemons included);
- a read-only view of the system (`/usr`, `/etc`, the Python installation and its packages, the
  compilers on PATH, kforge-bot's package folder) and of the kernel's own source folders, with every `.git`, the
  result cache, the home directory's credentials and the bot's scratch space hidden, and never the bot's working
  folder, its script's folder or `$RUNNER_TEMP` (`never_shown`);
- one writable directory, its own scratch (its HOME, TMPDIR and compiler caches live there too); its private
  `/tmp`, `/dev/shm` and `/run` are folders of that scratch (`private_folders`), so its limit counts them too;
- only the device nodes its target needs (`/dev/nvidia*` for CUDA, `/dev/dri` for XPU);
- where the installation has no compiled bytecode, the bot's own bytecode cache, read-only (evaluate.bytecode).

Memory, processes, CPU time and scratch space are limited by kforge_bot.evaluate.wire.limits. What it does not do:
separate two processes on one GPU beyond what the driver does.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kforge_bot.config.choices import ISOLATION_MODES
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.bytecode import MOUNT as BYTECODE_MOUNT
from kforge_bot.evaluate.wire.shipped import INBOX

# Top-level system folders the view holds read-only (those that exist; merged-/usr links stay links).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
_DEVICES = {"cuda": ("/dev/nvidia*", "/dev/nvidia-caps"), "xpu": ("/dev/dri",), "cpu": (), "mps": ()}
# Credentials and state that stay hidden wherever a readable folder would otherwise show them.
_HOME_SECRETS = (".ssh", ".git-credentials", ".gitconfig", ".netrc", ".config", ".cache", ".docker", ".aws",
                 ".kube", ".gnupg", ".local/share", ".pypirc", ".npmrc")
_ALWAYS_HIDDEN_NAMES = (".git", ".kforge-cache")
_COMPILERS = ("nvcc", "gcc", "g++", "cc", "c++", "clang", "clang++", "icpx", "ninja", "ptxas")
# Where a sandboxed process builds torch extensions it may not build in the shared compile-ahead folders
# (kforge_bot.evaluate.worker.importing): the same path in every sandbox, because ninja rebuilds a build found under any
# other path (its commands name the build folder), so a build made ahead is reused only where it was made.
EXTENSIONS_MOUNT = "/run/kforge-extensions"
INSTALL_HINT = ("install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap), or set policy "
                "isolation: off to run user code unsandboxed on a machine you trust")


@dataclass(frozen=True)
class SandboxStatus:
    """Whether this machine can sandbox workers, and if not, why and how to fix it."""

    available: bool
    tool: str = ""  # "bubblewrap 0.8.0"
    path: str = ""
    problem: str = ""  # one line: what failed
    hint: str = ""  # one line: the fix

    def describe(self) -> str:
        if self.available:
            return f"sandboxed ({self.tool}: own PID, user, mount and network namespaces; read-only system)"
        return f"NOT sandboxed: {self.problem}; {self.hint}"


@dataclass(frozen=True)
class View:
    """What one sandboxed process sees besides the system: its scratch directory (read-write), the kernel's
    source folders (read-only), extra read-write folders (a compile cache it may fill), the device nodes of
    its target kind, and the bot's bytecode cache (read-only at BYTECODE_MOUNT) where workers need one."""

    scratch: Path
    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    devices: str = "cpu"
    bytecode: Path | None = None


def _bwrap_path() -> str | None:
    configured = os.environ.get("KFORGE_BWRAP")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def probe() -> SandboxStatus:
    """Try the sandbox once per process: a real `bwrap` start with the flags workers get."""
    path = _bwrap_path()
    if path is None:
        return SandboxStatus(False, problem="bubblewrap (bwrap) is not installed", hint=INSTALL_HINT)
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        # A scratch of its own, removed after: the temp folder itself would keep the sandbox's private folders.
        with tempfile.TemporaryDirectory(prefix="kforge-sandbox-probe-") as scratch:
            argv = command(["/bin/sh", "-c", "exit 0"], View(scratch=Path(scratch)), path)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxStatus(False, path=path, problem=f"bwrap could not start ({exc})", hint=INSTALL_HINT)
    if proc.returncode != 0:
        error = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return SandboxStatus(False, path=path, problem=f"bwrap failed: {error}", hint=namespace_hint(error))
    return SandboxStatus(True, tool=version or "bubblewrap", path=path)


def namespace_hint(error: str) -> str:
    """The usual fix for the usual failure: user namespaces switched off for unprivileged users."""
    if "setuid" in error or "Operation not permitted" in error or "No permissions" in error \
            or "RTM_NEWADDR" in error or "Permission denied" in error:
        return ("unprivileged user namespaces are restricted: on Ubuntu 23.10+ install the bwrap-userns-restrict "
                "AppArmor profile or set sysctl kernel.apparmor_restrict_unprivileged_userns=0 on this dedicated "
                "runner; inside Docker, run the runner in a VM or with a seccomp profile that allows "
                "namespaces (hardware_runners/README.md)")
    return INSTALL_HINT


def resolve_isolation(isolation: str, status: SandboxStatus | None = None) -> bool:
    """Whether to sandbox, for a policy's `isolation` value; raises if `required` cannot be met."""
    if isolation not in ISOLATION_MODES:
        raise KforgeError(f"unknown isolation mode {isolation!r}", hint=f"use one of: {', '.join(ISOLATION_MODES)}")
    if isolation == "off":
        return False
    status = status or probe()
    if status.available:
        return True
    if isolation == "required":
        raise KforgeError(f"isolation is required but this machine cannot sandbox user code: {status.problem}",
                          hint=status.hint)
    return False


def announcement(isolation: str) -> str:
    """The first line of every command that runs user code: whether it is sandboxed, and if not, why and the fix.
    Raises (a one-line error) when the isolation is `required` and the machine cannot sandbox."""
    if isolation == "off":
        return "isolation: OFF (policy isolation: off): user code runs unsandboxed, as this user"
    status = probe()
    resolve_isolation(isolation, status)
    return f"isolation: {status.describe()}"


_TOOL_VARS = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "ONEAPI_ROOT", "CC", "CXX",
              "CUDAHOSTCXX", "NVCC_CCBIN", "HOME")


def never_shown() -> tuple[str, ...]:
    """Folders no sandbox may see, nor any folder that holds them: the bot's working folder and the script's
    folder (`python -m` and `python -c` put the working folder on sys.path, a script its own folder; under
    Actions a Python step runs from wherever it was started), and $RUNNER_TEMP, where actions/checkout leaves
    credential files. A kernel's own checkout is shown even where it is the working folder: it is what runs."""
    first = sys.path[0] if sys.path else ""
    script_folder = os.path.realpath(first or os.curdir)
    if any(_inside(script_folder, os.path.realpath(p)) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}):
        script_folder = ""  # an interpreter run with -P, or embedded: sys.path[0] is its own library
    runner_temp = os.environ.get("RUNNER_TEMP", "")
    return tuple(sorted({os.path.realpath(os.curdir), *([script_folder] if script_folder else []),
                         *([os.path.realpath(runner_temp)] if runner_temp else [])}))


def _shows(folder: str, hidden: tuple[str, ...]) -> bool:
    """Whether binding `folder` would show one of `hidden` (it is one, or holds one)."""
    return any(_inside(h, folder) for h in hidden)


def _system_tool_dirs() -> list[Path]:
    """Where the Python installation, its packages and the compilers live (read-only in the view)."""
    return _tool_dirs(tuple(sys.path[1:]), tuple(os.environ.get(v, "") for v in _TOOL_VARS), never_shown())


@functools.lru_cache(maxsize=8)
def _tool_dirs(path: tuple[str, ...], env_values: tuple[str, ...], hidden: tuple[str, ...]) -> list[Path]:
    """Cached per sys.path, environment and working folder: looking them up costs milliseconds, a worker start
    a few more. `path` is sys.path less its first entry (the working or the script's folder); anything that is
    or holds a `hidden` folder is left out, whatever named it (a PATH entry ".", a link in site-packages)."""
    env = dict(zip(_TOOL_VARS, env_values))
    dirs: set[str] = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    dirs.update(p for p in path if p and os.path.isabs(p) and os.path.isdir(p))
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    for var in ("PATH", "LD_LIBRARY_PATH"):
        dirs.update(p for p in env[var].split(os.pathsep) if p and os.path.isabs(p))
    dirs.update(env[var] for var in ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "ONEAPI_ROOT") if env[var])
    named = [env[v].split()[0] for v in ("CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN") if env[v].strip()]
    for tool in (*_COMPILERS, *named):
        # A toolchain installed under its own prefix (/opt/gcc/bin/gcc, often named by $CC and $CXX rather than
        # found on PATH) needs that prefix's headers and libraries.
        found = shutil.which(tool, path=env["PATH"] or None)
        if found:
            prefix = os.path.dirname(os.path.dirname(os.path.realpath(found)))
            dirs.add(prefix if prefix not in ("/", env["HOME"]) else os.path.dirname(found))
    # This kforge_bot package (installed, or a checkout: its folder alone, not the checkout around it).
    dirs.add(str(Path(__file__).resolve().parents[1]))
    for entry in [p for p in path if p and os.path.isabs(p) and os.path.isdir(p)]:
        # A folder of links to packages elsewhere (a hook's environment made of links): the targets too.
        with os.scandir(entry) as children:
            dirs.update(os.path.dirname(os.path.realpath(c.path)) for c in children if c.is_symlink())
    return [Path(d) for d in sorted(dirs) if os.path.isdir(d) and not _shows(os.path.abspath(d), hidden)
            and not _shows(os.path.realpath(d), hidden)]


def _inside(path: str, folder: str) -> bool:
    """`path` is `folder` or below it (plain strings: pathlib's is_relative_to cost a worker start milliseconds)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _under_system(path: str) -> bool:
    return any(_inside(path, top) for top in _SYSTEM)


def _hidden_inside(folder: str, home_secrets: list[str]) -> list[str]:
    """Things inside `folder` that must stay hidden: .git, the gate's cache, the home directory's credentials."""
    found = [os.path.join(folder, name) for name in _ALWAYS_HIDDEN_NAMES if os.path.lexists(os.path.join(folder, name))]
    return found + [secret for secret in home_secrets if _inside(secret, folder)]


def command(argv: list[str], view: View, bwrap: str | None = None) -> list[str]:
    """`argv` wrapped in bwrap with `view`; pure apart from looking at which paths exist."""
    args = [bwrap or _bwrap_path() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--hostname", "kforge-sandbox"]
    for top in _SYSTEM:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc", "--dev", "/dev"]
    # Folders of the scratch, not tmpfs mounts of their own: all it can write is in the one folder whose size the
    # bot watches (tmpfs mounts of the scratch's size each were three more scratches, unseen, in memory).
    for private, folder in private_folders(Path(view.scratch).resolve()).items():
        folder.mkdir(parents=True, exist_ok=True)
        args += ["--bind", str(folder), private]
    if view.bytecode is not None:  # "-try": a cache deleted under a running bot leaves workers slower, not broken
        args += ["--ro-bind-try", str(Path(view.bytecode).resolve()), BYTECODE_MOUNT]
    # "-try": `environment` makes it; without it the folder is the sandbox's own empty /run (same path still).
    args += ["--bind-try", str(extensions_folder(Path(view.scratch).resolve())), EXTENSIONS_MOUNT]
    for pattern in _DEVICES.get(view.devices, ()):
        for node in sorted(glob.glob(pattern)):
            args += ["--dev-bind", node, node]
    runner_temp = os.path.realpath(os.environ["RUNNER_TEMP"]) if os.environ.get("RUNNER_TEMP") else ""
    folders = {str(f) for f in _system_tool_dirs()} | {str(Path(p).resolve()) for p in view.readable
                                                         if os.path.exists(p)
                                                         and not (runner_temp and _shows(str(Path(p).resolve()),
                                                                                         (runner_temp,)))}
    bound: list[str] = []
    for folder in sorted(folders, key=lambda f: (f.count("/"), f)):  # parents first
        if _under_system(folder) or any(_inside(folder, b) for b in bound):
            continue  # already in the view
        args += ["--ro-bind", folder, folder]
        bound.append(folder)
    home = os.path.expanduser("~")
    home_secrets = [os.path.join(home, name) for name in _HOME_SECRETS if os.path.lexists(os.path.join(home, name))]
    hide: set[str] = set()
    for folder in folders:  # a folder inside a bound one is visible too: its .git as well
        if any(_inside(folder, b) for b in bound):
            hide.update(_hidden_inside(folder, home_secrets))
    for path in sorted(hide):  # an empty read-only folder, or /dev/null, in its place
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    for folder in [*view.writable, view.scratch]:
        resolved = str(Path(folder).resolve())
        args += ["--bind", resolved, resolved]
    inbox = inbox_folder(Path(view.scratch).resolve())
    inbox.mkdir(exist_ok=True)
    args += ["--ro-bind", str(inbox), str(inbox)]  # over the scratch's own bind: the worker reads, only the bot writes
    # The sandbox's own root and /dev are tmpfs mounts outside the scratch, whose size nobody watches: read-only once
    # made (a red-team pass wrote into both; /dev/shm, /tmp and /run are the scratch's folders, bound above).
    args += ["--remount-ro", "/", "--remount-ro", "/dev"]
    args += ["--chdir", str(Path(view.scratch).resolve()), "--"]
    return args + list(argv)


def private_folders(scratch: Path) -> dict[str, Path]:
    """The sandbox's /tmp, /dev/shm and /run, and the folders of `scratch` they are."""
    return {private: scratch / ".private" / private.strip("/").replace("/", "-") for private in ("/tmp", "/dev/shm",
                                                                                                 "/run")}


def inbox_folder(scratch: Path) -> Path:
    """The folder of `scratch` a sandbox sees read-only: what the bot hands its worker while it runs (shipped
    inputs, evaluate.shipping), which the worker's code can neither change nor replace."""
    return scratch / INBOX


def extensions_folder(scratch: Path) -> Path:
    """The host folder a sandbox on `scratch` sees at EXTENSIONS_MOUNT (its private torch-extension builds)."""
    return scratch / ".home" / "extensions"


def environment(base: dict[str, str], view: View) -> dict[str, str]:
    """`base` with HOME, TMPDIR and the compilers' caches pointed into the view's scratch directory, and Python's
    bytecode read from the view's cache where it has one."""
    home = view.scratch / ".home"
    for sub in ("", "tmp", "cache", "triton", "torch_extensions", "nv"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    extensions_folder(view.scratch).mkdir(exist_ok=True)
    env = dict(base)
    # Every cache in the scratch: the user's own cache folders are not visible, let alone writable, inside.
    env.update({"HOME": str(home), "TMPDIR": str(home / "tmp"), "XDG_CACHE_HOME": str(home / "cache"),
                "TRITON_CACHE_DIR": str(home / "triton"), "CUDA_CACHE_PATH": str(home / "nv"),
                "TORCH_EXTENSIONS_DIR": str(home / "torch_extensions"), "KFORGE_EXTENSIONS_PRIVATE": EXTENSIONS_MOUNT,
                "TORCHINDUCTOR_CACHE_DIR": str(home / "cache" / "torchinductor")})
    env.pop("PYTHONPYCACHEPREFIX", None)  # a host folder of the user's: not in the view
    if view.bytecode is not None:
        env["PYTHONPYCACHEPREFIX"] = BYTECODE_MOUNT
    return env
