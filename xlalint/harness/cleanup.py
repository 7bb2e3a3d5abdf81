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

A script that starts processes with an emptied environment (``env={}``) hides them
from the token; those in the child's process group are still killed with it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
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


def kill_marked(token: str) -> list[int]:
    """SIGKILL every process with ``token``, until none is left; returns those killed."""
    killed: list[int] = []
    for _ in range(_KILL_ROUNDS):
        found = [pid for pid in marked_processes(token) if pid not in killed or _alive(pid)]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
            if pid not in killed:
                killed.append(pid)
    return killed


def _alive(pid: int) -> bool:
    """Running; a zombie (dead, waiting for its parent to reap it) is not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


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
