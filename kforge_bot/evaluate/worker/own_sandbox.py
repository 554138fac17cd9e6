"""The sandbox a forked worker enters (evaluate.worker.forkserver): bubblewrap's, made by this process itself.

The view is the one bubblewrap gets: `isolation.command`'s argument list, read here (`read_arguments`) and applied
in the order given, so what a worker sees is decided in one place for both ways of starting it. Applied with the
same namespaces and in the same shape: `enter` runs in a freshly forked, single-threaded child (it must be: Linux
refuses a new user namespace to a threaded process) and returns in the worker's own process, pid 2 of a PID
namespace of its own whose init (pid 1) reaps and exits with the worker, as bubblewrap's does; the caller that
forked stays outside, waits, and exits with the worker's status (128 + N for a fatal signal N, as bwrap reports).

What a worker cannot do inside that it could not do inside bubblewrap: it has no capabilities (bounding set,
ambient and effective sets emptied, no_new_privs set), so it cannot unmount what hides a `.git`; every mount it
sees was made in a user namespace above a second one it is moved into, so the kernel locks them too.
An option this reader does not know, or a system call that fails, raises `SandboxError`. In the forkserver's own
probe, it then starts no worker and the bot starts them with bubblewrap; in one worker's start, that worker ends
with the error as its one line (`kforge-sandbox: ...`), which the bot reports as its own failure, never the
candidate's, as it does bwrap's.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import signal
import socket
import struct
from dataclasses import dataclass, field
from typing import NoReturn

from kforge_bot.evaluate.worker.parent import die_with_parent

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND = 2, 4, 8, 4096
MS_REC, MS_PRIVATE = 16384, 1 << 18
MNT_DETACH = 2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (new system calls share one table)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
# bwrap's --dev: these nodes from the host's /dev, and links into /proc
_DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
_DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
              "stderr": "/proc/self/fd/2", "core": "/proc/kcore"}
_FLAGS = ("--unshare-all", "--die-with-parent", "--new-session")  # what every worker's arguments say
_BASE = "/tmp"  # where the new root is built: a tmpfs over it, in this mount namespace only


class SandboxError(Exception):
    """The sandbox could not be made as asked: no worker may start this way."""


@dataclass
class Layout:
    """bwrap's arguments as steps: what `enter` does, in order."""

    hostname: str = ""
    chdir: str = "/"
    steps: list[tuple[str, ...]] = field(default_factory=list)  # ("bind", src, dest, "ro"|"rw"|"dev", "try"|"")...


def read_arguments(args: list[str]) -> Layout:
    """The steps of bubblewrap's argument list (`isolation.command`), up to `--`. Raises SandboxError on an option
    it does not know or a worker's fixed flag missing: this sandbox does exactly what bwrap would, or nothing."""
    layout, seen, i = Layout(), set(), 1  # args[0] is bwrap's path
    takes = {"--hostname": 1, "--symlink": 2, "--ro-bind": 2, "--ro-bind-try": 2, "--bind": 2, "--bind-try": 2,
             "--dev-bind": 2, "--proc": 1, "--dev": 1, "--tmpfs": 1, "--remount-ro": 1, "--chdir": 1,
             "--cap-drop": 1}
    while i < len(args) and args[i] != "--":
        option = args[i]
        if option in _FLAGS:
            seen.add(option)
            i += 1
            continue
        if option not in takes or i + takes[option] >= len(args):
            raise SandboxError(f"bwrap option {option!r} is not one this sandbox makes")
        values = args[i + 1:i + 1 + takes[option]]
        i += 1 + takes[option]
        if option == "--hostname":
            layout.hostname = values[0]
        elif option == "--chdir":
            layout.chdir = values[0]
        elif option == "--cap-drop":
            if values[0] != "ALL":
                raise SandboxError("only --cap-drop ALL is made")
            seen.add(option)
        elif option.startswith(("--ro-bind", "--bind", "--dev-bind")):
            mode = "ro" if option.startswith("--ro-") else "dev" if option == "--dev-bind" else "rw"
            layout.steps.append(("bind", values[0], values[1], mode, "try" if option.endswith("-try") else ""))
        else:
            layout.steps.append((option[2:], *values))
    missing = {*_FLAGS, "--cap-drop"} - seen
    if missing:
        raise SandboxError(f"the arguments lack {', '.join(sorted(missing))}")
    return layout


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_b(source), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data)), f"mount {target}")


def _b(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _set_attributes(target: str, attrs: int, recursive: bool) -> None:
    """mount_setattr(2): only the given attributes change, on every mount below too where `recursive` (a remount
    would have to repeat each mount's locked flags, one by one)."""
    attr = _MountAttr(attrs, 0, 0, 0)
    result = _libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), _b(target),
                           ctypes.c_uint(AT_RECURSIVE if recursive else 0), ctypes.byref(attr),
                           ctypes.c_size_t(ctypes.sizeof(attr)))
    _check(result, f"mount_setattr {target}")


def _pivot_root(new_root: str, put_old: str) -> None:
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SandboxError(f"pivot_root's number on {platform.machine()} is not known here")
    _check(_libc.syscall(ctypes.c_long(number), _b(new_root), _b(put_old)), "pivot_root")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _own_user_namespace(uid: int, gid: int, more: int = 0) -> None:
    """A new user namespace (with `more` namespaces) in which this process is `uid`:`gid`, as outside."""
    _check(_libc.unshare(ctypes.c_int(CLONE_NEWUSER | more)), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")


def dies_with_parent() -> None:
    """SIGKILL to this process when its parent ends, or SandboxError."""
    if not die_with_parent():
        raise SandboxError("could not ask for SIGKILL when the parent ends (prctl)")


def give_up(error: BaseException) -> NoReturn:
    """End a forked child whose sandbox could not be made: the one line the bot reports (sandbox.WorkerOutcome's
    sandbox_failure), and nothing more of the forkserver's code run."""
    os.write(2, f"kforge-sandbox: {error}\n".encode())
    os._exit(1)


def _status_code(status: int) -> int:
    """bwrap's exit status for a child's wait status: its exit code, or 128 + the signal that ended it."""
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def enter(args: list[str]) -> None:
    """Called in a forked, single-threaded child: returns in the worker's process inside the sandbox of `args`
    (bwrap's argument list). The processes around it never return: they exit with the worker's status. Raises
    SandboxError before anything is shared with the worker's code."""
    layout = read_arguments(args)
    # Each source as the host resolves it, while this process still sees the host's tree: under /oldroot, an
    # absolute link on the way would resolve against the new root's.
    layout.steps = [("bind", os.path.realpath(s[1]), *s[2:]) if s[0] == "bind" else s for s in layout.steps]
    uid, gid = os.getuid(), os.getgid()
    os.setsid()  # --new-session: no terminal to push keystrokes into; one process group for the bot to kill
    _own_user_namespace(uid, gid, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
                        | CLONE_NEWCGROUP)
    init = os.fork()  # pid 1 of the new PID namespace
    if init:
        _, status = os.waitpid(init, 0)
        os._exit(_status_code(status))
    # The namespace's init: no handler of Python's (SIGINT's raised KeyboardInterrupt), so that, as for bwrap's
    # init, the kernel drops every signal a process inside sends it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        dies_with_parent()
        # Not dumpable: the worker below may not read or write this process's memory (/proc/1/mem), though the
        # same user: this process holds every capability over the mounts that hide .git and the credentials.
        _check(_libc.prctl(PR_SET_DUMPABLE, ctypes.c_ulong(0), 0, 0, 0), "prctl DUMPABLE")
        _build_root(layout)
        if layout.hostname:
            _check(_libc.sethostname(_b(layout.hostname), ctypes.c_size_t(len(layout.hostname))), "sethostname")
        _loopback_up()
    except (SandboxError, OSError) as exc:
        give_up(exc)
    worker = os.fork()
    if worker:
        _reap_until(worker)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the worker's, as a fresh interpreter has it
    dies_with_parent()
    # Dumpable again (fork kept the init's setting): a process that is not cannot write its own uid_map.
    _check(_libc.prctl(PR_SET_DUMPABLE, ctypes.c_ulong(1), 0, 0, 0), "prctl DUMPABLE")
    # A second user namespace: every mount made above is locked for it (it can unmount none of them), and
    # then no capability at all.
    _own_user_namespace(uid, gid, CLONE_NEWNS)
    _drop_capabilities()
    os.chdir(layout.chdir)


def _reap_until(worker: int) -> None:
    """The namespace's init: reap whatever is re-parented here, and exit with the worker's status when it ends
    (the kernel then kills what is left in the namespace)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if pid == worker:
            os._exit(_status_code(status))


def _build_root(layout: Layout) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host's namespace
    _mount("tmpfs", _BASE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for folder in ("newroot", "oldroot"):
        os.mkdir(os.path.join(_BASE, folder), 0o755)
    _mount("tmpfs", os.path.join(_BASE, "newroot"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    _pivot_root(_BASE, os.path.join(_BASE, "oldroot"))  # the host's tree now under /oldroot, the new one at /newroot
    os.chdir("/")
    for step in layout.steps:
        _apply(step)
    os.chdir("/newroot")
    _pivot_root(".", ".")  # the new root on top, the old stacked under it and detached
    _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount the host's tree")
    os.chdir("/")


def _apply(step: tuple[str, ...]) -> None:
    kind, rest = step[0], step[1:]
    if kind == "bind":
        source, dest, mode, optional = rest
        _bind("/oldroot" + source, "/newroot" + dest, mode, optional == "try")
    elif kind == "symlink":
        target, path = rest
        _parents("/newroot" + path)
        os.symlink(target, "/newroot" + path)
    elif kind == "proc":
        _ensure_dir("/newroot" + rest[0])
        _mount("proc", "/newroot" + rest[0], "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    elif kind == "dev":
        _dev("/newroot" + rest[0])
    elif kind == "tmpfs":
        _ensure_dir("/newroot" + rest[0])
        _mount("tmpfs", "/newroot" + rest[0], "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    elif kind == "remount-ro":
        _set_attributes("/newroot" + rest[0], MOUNT_ATTR_RDONLY, recursive=False)
    else:  # pragma: no cover - read_arguments knows no other
        raise SandboxError(f"unknown step {kind}")


def _bind(source: str, dest: str, mode: str, optional: bool) -> None:
    if not os.path.exists(source):
        if optional:
            return
        raise SandboxError(f"cannot bind {source[len('/oldroot'):]}: it does not exist")
    if os.path.isdir(source):
        _ensure_dir(dest)
    else:
        _parents(dest)
        if not os.path.lexists(dest):
            os.close(os.open(dest, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(source, dest, None, MS_BIND | MS_REC)
    attrs = MOUNT_ATTR_NOSUID | (0 if mode == "dev" else MOUNT_ATTR_NODEV) | (MOUNT_ATTR_RDONLY if mode == "ro" else 0)
    _set_attributes(dest, attrs, recursive=True)


def _dev(dest: str) -> None:
    _ensure_dir(dest)
    _mount("tmpfs", dest, "tmpfs", MS_NOSUID, "mode=0755")
    for node in _DEV_NODES:
        if os.path.exists("/oldroot/dev/" + node):
            _bind("/oldroot/dev/" + node, f"{dest}/{node}", "dev", optional=False)
    for name, target in _DEV_LINKS.items():
        os.symlink(target, f"{dest}/{name}")
    for folder in ("shm", "pts"):
        os.mkdir(f"{dest}/{folder}", 0o755)


def _parents(path: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)


def _ensure_dir(path: str) -> None:
    try:
        os.makedirs(path, mode=0o755, exist_ok=True)
    except FileExistsError as exc:  # a file or link in the way
        raise SandboxError(f"cannot make the folder {path}: something else is there") from exc


def _loopback_up() -> None:
    """The network namespace's own loopback, up (as bwrap leaves it): nothing else is reachable."""
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """No capability left, in any set, and none to be gained by executing anything (--cap-drop ALL)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            _check(-1, "drop a capability")
    _check(_libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0), "clear ambient caps")
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0), "no_new_privs")
