"""What the harness's child modules share (stdlib only; runs inside the user's processes,
copied into the hook folder as ``_xlalint_child_common``; see ``bootstrap.py``)."""

from __future__ import annotations

import json
import os
import re

#: Folder where every process writes its records (``metrics-<pid>.json``, ...); the hook
#: does nothing when it is not set.
OUT_DIR_ENV = "XLALINT_HARNESS_OUT"
# Frames in these places are not the user's code (the same test as the runner's): nor
# are the harness's own wrappers in the hook folder (``_xlalint_*.py``).
LIBRARY_FRAME = re.compile(r"(/site-packages/|/dist-packages/|/lib/python\d+\.\d+/|^<|/_xlalint_\w+\.py$)")
MAX_FRAMES_UP = 40  # looking for the user's frame above a library's call
#: The process ``bootstrap.activate`` ran in (a fork child holds its parent's value).
ACTIVE_PID: int | None = None


def write_json(path: str, record: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(path + ".tmp", path)


def user_frame(frame):
    """``frame`` when it is in the user's code, else None."""
    return None if LIBRARY_FRAME.search(frame.f_code.co_filename) else frame


def innermost_user_frame(frame):
    """The first frame of the user's code at or above ``frame``, or None."""
    depth = 0
    while frame is not None and user_frame(frame) is None and depth < MAX_FRAMES_UP:
        frame, depth = frame.f_back, depth + 1
    return frame if frame is not None and user_frame(frame) is not None else None


def runtime_watch():
    """The runtime watch (XLA501, XLA502, the loss): the copy in the hook folder, or the
    package's own when this module is imported from xlalint."""
    try:
        import _xlalint_runtime_watch as watch
    except ImportError:
        from xlalint.harness import runtime_watch as watch
    return watch
