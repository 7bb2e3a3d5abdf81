"""The ``pip install`` command that adds an extra to *this* install of xlalint.

xlalint is not on PyPI: ``pip install 'xlalint[harness]'`` fails for everyone who
installed it from a clone or a URL. So the hint names where this install came from:

- code imported from a source tree (a clone, installed editable or run from it):
  ``pip install -e '<tree>[extra]'`` (``.`` when that tree is the working folder);
- an install from a URL (PEP 610 ``direct_url.json``): a git URL at its commit, an
  archive, or a local folder (editable or not);
- otherwise the index form, ``pip install 'xlalint[extra]'``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import xlalint


def install_command(extra: str) -> str:
    """The command that installs xlalint with ``extra``, for this install."""
    tree = _source_tree(Path(xlalint.__file__).resolve().parent.parent)
    if tree is not None:
        return f"pip install -e {shlex.quote(_shown(tree) + f'[{extra}]')}"
    direct = _direct_url()
    if direct is not None:
        return _from_direct_url(direct, extra)
    return f"pip install {shlex.quote(f'xlalint[{extra}]')}"


def _source_tree(folder: Path) -> Path | None:
    """``folder`` if it is xlalint's source tree (its pyproject.toml names the project)."""
    try:
        text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return folder if 'name = "xlalint"' in text else None


def _shown(tree: Path) -> str:
    try:
        same = tree.samefile(Path.cwd())
    except OSError:
        same = False
    return "." if same else str(tree)


def _direct_url() -> dict | None:
    import importlib.metadata

    try:
        text = importlib.metadata.distribution("xlalint").read_text("direct_url.json")
        data = json.loads(text) if text else None
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("url"), str) else None


def _from_direct_url(direct: dict, extra: str) -> str:
    url = direct["url"]
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        at = f"@{commit}" if isinstance(commit, str) and commit else ""
        requirement = f"xlalint[{extra}] @ {vcs['vcs']}+{url}{at}"
        return f"pip install {shlex.quote(requirement)}"
    from urllib.request import url2pathname  # here: urllib.request imports http, email, ...

    dir_info = direct.get("dir_info")
    parts = urlsplit(url)
    if isinstance(dir_info, dict) and parts.scheme == "file":
        folder = url2pathname(parts.path)
        editable = "-e " if dir_info.get("editable") else ""
        shown = _shown(Path(folder)) if os.path.isdir(folder) else folder
        return f"pip install {editable}{shlex.quote(f'{shown}[{extra}]')}"
    return f"pip install {shlex.quote(f'xlalint[{extra}] @ {url}')}"


def source_file_url(relative: str) -> str | None:
    """The URL of a file of xlalint's source tree (``docs/rules.md``) for this install:
    the file itself (``file:``) in a source tree or a local folder it was installed
    from; on GitHub, the file at the commit a git install was made from; else None (a
    wheel from an index carries no docs, and other hosts' file URLs are not guessed)."""
    here = _source_tree(Path(xlalint.__file__).resolve().parent.parent)
    if here is not None and (here / relative).is_file():
        return (here / relative).as_uri()
    direct = _direct_url()
    if direct is None:
        return None
    parts = urlsplit(direct["url"])
    vcs, dir_info = direct.get("vcs_info"), direct.get("dir_info")
    if isinstance(dir_info, dict) and parts.scheme == "file":
        from urllib.request import url2pathname

        path = Path(url2pathname(parts.path)) / relative
        return path.as_uri() if path.is_file() else None
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and parts.scheme == "https" and parts.hostname == "github.com":
        commit = vcs.get("commit_id")
        repository = parts.path.removesuffix("/").removesuffix(".git").strip("/")
        if isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit) and repository.count("/") == 1:
            subdirectory = direct.get("subdirectory")
            inside = f"{subdirectory.strip('/')}/" if isinstance(subdirectory, str) and subdirectory.strip("/") else ""
            return f"https://github.com/{repository}/blob/{commit}/{inside}{relative}"
    return None
