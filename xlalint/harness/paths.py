"""How the harness report shows a file's path."""

from __future__ import annotations

import os


def shown_path(path: str) -> str:
    """``path`` as the report shows it: relative to the working folder when it is inside it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
