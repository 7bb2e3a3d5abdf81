"""No process of the script, and no temporary folder, outlives ``xlalint run``.

Killing the child's process group is not enough: a grandchild that calls ``setsid``
(``subprocess.Popen(..., start_new_session=True)``, a daemon) leaves the group, and
when ``xlalint run`` itself is killed with SIGKILL nothing of it runs to clean up.
So:

- every process of a run carries a token in its environment
  (``XLALINT_RUN_TOKEN``, inherited by whatever the script starts, whatever its
  session); at the end of a run every process with the token is killed (Linux
  ``/proc/PID/environ``; the process group alone elsewhere);
- a watchdog process (standard library only, its own session) holds the read end of
  a pipe whose write end only ``xlalint run`` holds. When ``xlalint run`` ends
  normally it says so on the pipe; if the pipe closes without that (SIGKILL, a
  crash), the watchdog kills the token's processes and removes the temporary folder;
- temporary folders are named ``xlalint-run-<owner pid>-*``: one whose owner is gone
  (left by a kill before this module existed, or a machine crash) is removed by the
  next run.

- for the duration of a run ``xlalint run`` is a child subreaper (Linux
  ``prctl(PR_SET_CHILD_SUBREAPER)``): a process whose parent dies is reparented to it,
  not to init, so every process the script started stays in its process tree, even one
  in a new session with an emptied environment (``setsid env -i ...``), which neither
  the group nor the token finds. At the end of a run the tree is killed with the rest
  (:class:`ScriptProcesses`), and the report says which processes were killed and which
  could not be.

- the script does not run as our child but as the child of a launcher (Linux:
  :func:`contain`), itself a child subreaper that outlives ``xlalint run``: it asks the
  kernel for a signal when its parent dies (``PR_SET_PDEATHSIG``) and then kills every
  process under it, so even a SIGKILL of ``xlalint run`` leaves no process of the
  script, whatever its session and environment. It passes on the script's exit status
  (a death by a signal as that signal). It carries no token in its environment: the
  watchdog must not kill it before it has killed what is under it.

Without a subreaper (not Linux), a process in a new session with an emptied
environment cannot be found; the report says so rather than claim it was killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "XLALINT_RUN_TOKEN"
TEMP_PREFIX = "xlalint-run-"
_TEMP_NAME = re.compile(rf"^{re.escape(TEMP_PREFIX)}(\d+)-")
_DONE = b"done"
_KILL_ROUNDS = 20  # killing may race with a process that forks: look again

_WATCHDOG = r"""
import os, shutil, signal, sys, time
for name in ("SIGHUP", "SIGINT", "SIGTERM"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
token, folder = sys.argv[1].encode(), sys.argv[2]
said = sys.stdin.buffer.read()
if said == b"done":
    sys.exit(0)
marker = b"XLALINT_RUN_TOKEN=" + token
for _ in range(20):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                environ = file.read().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            found.append(int(name))
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if not found:
        break
    time.sleep(0.05)
if folder:
    shutil.rmtree(folder, ignore_errors=True)
"""


# The launcher (see ``contain``): argv is our pid, then the variable to add to the
# script's environment (NAME=VALUE, or "" for none), then the script's command.
_LAUNCHER = r"""
import ctypes, os, resource, signal, sys, time
parent, extra, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
ORPHANED = signal.SIGUSR2

def descendants():
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as file:
                    fields = file.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] not in (b"Z", b"X"):
                children.setdefault(int(fields[1]), []).append(int(name))
    found, pending = [], [os.getpid()]
    while pending:
        for pid in children.get(pending.pop(), ()):
            found.append(pid)
            pending.append(pid)
    return found

def parent_lives():
    # xlalint run is our parent and is not dying. A SIGKILLed process closes its files
    # (the watchdog's pipe, which sets the watchdog killing the script) before the kernel
    # reparents us and sends our death signal; in between it is flagged PF_EXITING.
    if os.getppid() != parent:
        return False
    try:
        with open(f"/proc/{parent}/stat", "rb") as file:
            flags = int(file.read().rsplit(b")", 1)[1].split()[6])
    except (OSError, IndexError, ValueError):
        return False
    return not flags & 0x4  # PF_EXITING

def kill_everything(*_):
    if parent_lives():
        return  # the signal came from the script, not from the kernel: xlalint run lives
    for _ in range(50):  # a process may fork while it is killed: look again
        found = descendants()
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.02)
    os._exit(137)

for name in ("SIGINT", "SIGTERM", "SIGHUP"):  # meant for the script (the group); its status ends us
    signal.signal(getattr(signal, name), lambda *_: None)
signal.signal(ORPHANED, kill_everything)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
libc.prctl(1, int(ORPHANED), 0, 0, 0)  # PR_SET_PDEATHSIG
kill_everything()  # xlalint run died before the line above: nothing is started
env = dict(os.environ)
if extra:
    name, _, value = extra.partition("=")
    env[name] = value
script = os.fork()
if script == 0:
    try:
        os.execvpe(command[0], command, env)
    finally:
        os._exit(127)
status = os.waitpid(script, 0)[1]
# The script may have ended because xlalint run died (the watchdog kills the script
# as soon as the pipe closes, which can be before our death signal comes): then what
# the script started is killed here, before we go, or it would outlive us.
kill_everything()
if os.WIFSIGNALED(status):
    number = os.WTERMSIG(status)
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if number not in (signal.SIGKILL, signal.SIGSTOP):  # those have no handler to reset
        signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)
    os._exit(128 + number)
os._exit(os.waitstatus_to_exitcode(status))
"""


def contain(command: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``command`` under the launcher (Linux; as
    they are elsewhere): the script's processes die with ``xlalint run``, even when it
    is SIGKILLed. The run's token moves from the environment to the launcher's
    arguments (the script still gets it)."""
    if _subreaper() is None:
        return command, env
    env = dict(env)
    token = env.pop(TOKEN_ENV, None)
    extra = f"{TOKEN_ENV}={token}" if token is not None else ""
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), extra, *command], env


def new_token() -> str:
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def marked_processes(token: str) -> list[int]:
    """Processes (of this user) whose environment carries ``token``; [] without /proc."""
    marker = f"{TOKEN_ENV}={token}".encode()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                environ = file.read().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        if marker in environ and _alive(int(name)):
            found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    """Running; a zombie (dead, waiting for its parent to reap it) is not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


# <linux/prctl.h>
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_DEATH_WAIT_S = 2.0  # for SIGKILLed processes to be gone (one in the kernel takes a moment)


@dataclass(frozen=True)
class Leftovers:
    """The processes a run left running when its script ended, and what became of them."""

    killed: tuple[int, ...] = ()
    #: Found but still running after SIGKILL (another user's, or stuck in the kernel).
    not_killed: tuple[int, ...] = ()
    #: Whether every descendant could be found (a subreaper); if not, one that left the
    #: process group and the token's environment may still run, unseen.
    tracked: bool = True


class ScriptProcesses:
    """Every process of one run of the script, found through the process tree.

    While open, this process is a child subreaper: orphans among the script's
    descendants are reparented to it. The script's processes are then the descendants
    of the child and of the new children of this process (those reparented to it)."""

    def __init__(self) -> None:
        self.tracked = False
        self._previous: int | None = None
        self._children_before: set[int] = set()

    def __enter__(self) -> ScriptProcesses:
        self._previous = _subreaper()
        if self._previous is not None and (self._previous or _set_subreaper(1)):
            self.tracked = True
        self._children_before = set(_children(os.getpid(), _parents()))
        return self

    def __exit__(self, *exc) -> None:
        if self._previous == 0 and self.tracked:
            _set_subreaper(0)

    def find(self, child: int, also: Iterable[int] = ()) -> set[int]:
        """The running processes of the script other than ``child`` itself (its
        descendants and the orphans reparented to us), with those in ``also``."""
        parents = _parents()
        adopted = set(_children(os.getpid(), parents)) - self._children_before - {child}
        found = _descendants({child} | adopted, parents) | adopted | set(also)
        return {pid for pid in found - {child, os.getpid()} if _alive(pid)}

    def kill(self, child: int, find_more=lambda: ()) -> Leftovers:
        """SIGKILL the script's processes (``find`` with ``find_more()``, looked up again
        after each round: a process may fork while it is killed) and reap those
        reparented to us; returns which died and which did not."""
        signalled: set[int] = set()
        for _ in range(_KILL_ROUNDS):
            found = self.find(child, find_more())
            if not found:
                break
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    signalled.add(pid)
            self._reap(child)
        deadline = time.monotonic() + _DEATH_WAIT_S
        while any(_alive(pid) for pid in signalled) and time.monotonic() < deadline:
            time.sleep(0.02)
            self._reap(child)
        remaining = self.find(child, find_more())
        not_killed = sorted(remaining | {pid for pid in signalled if _alive(pid)})
        killed = sorted(signalled - set(not_killed))
        return Leftovers(tuple(killed), tuple(not_killed), self.tracked)

    def _reap(self, child: int) -> None:
        """Collect the exit status of dead orphans reparented to us (else they stay
        zombies of this process); never the child's, which its Popen waits for."""
        for pid in set(_children(os.getpid(), _parents())) - self._children_before - {child}:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _subreaper() -> int | None:
    """This process's child-subreaper flag; None where there is none (not Linux)."""
    libc = _libc() if sys.platform.startswith("linux") else None
    if libc is None:
        return None
    flag = ctypes.c_int(0)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
        return None
    return flag.value


def _set_subreaper(value: int) -> bool:
    libc = _libc()
    return libc is not None and libc.prctl(_PR_SET_CHILD_SUBREAPER, value, 0, 0, 0) == 0


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (Linux /proc; {} elsewhere)."""
    parents = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                # "pid (comm) state ppid ...": comm may hold spaces and ")", so split after the last.
                parents[int(name)] = int(file.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def _children(pid: int, parents: dict[int, int]) -> list[int]:
    return [child for child, parent in parents.items() if parent == pid]


def _descendants(roots: set[int], parents: dict[int, int]) -> set[int]:
    by_parent: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        by_parent.setdefault(parent, []).append(pid)
    found, pending = set(), list(roots)
    while pending:
        for pid in by_parent.get(pending.pop(), ()):
            if pid not in found:
                found.add(pid)
                pending.append(pid)
    return found


class Watchdog:
    """Kills the run's processes and removes ``folder`` if ``xlalint run`` dies."""

    def __init__(self, token: str, folder: Path) -> None:
        self._process: subprocess.Popen | None = None
        self._pipe: int | None = None
        if not os.path.isdir("/proc"):
            return  # the token cannot be found without /proc
        read_end, write_end = os.pipe()  # not inherited by the script's processes
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, token, str(folder)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a hangup or Ctrl-C of our group is not its
            )
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        self._pipe = write_end

    def stand_down(self) -> None:
        """``xlalint run`` cleaned up itself: the watchdog exits without doing anything."""
        if self._pipe is None:
            return
        with contextlib.suppress(OSError):  # the watchdog is gone: nothing to tell
            os.write(self._pipe, _DONE)
        os.close(self._pipe)
        self._pipe = None
        if self._process is not None:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


def temp_folder() -> tempfile.TemporaryDirectory:
    """The run's temporary folder, named after this process (see ``remove_stale``)."""
    return tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-")


def remove_stale_temp_folders(parent: Path | None = None) -> list[Path]:
    """Remove our temporary folders whose owner process is gone; returns them.

    Only folders named as ``temp_folder`` names them, owned by this user, not links.
    """
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if not match:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if _pid_exists(int(match.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def _pid_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process with that pid: not ours to judge
    return True
