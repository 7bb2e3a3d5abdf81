"""Each run of ``xlalint run --compare`` in its own copy of the working directory.

The original and the fixed script used to run in the user's working directory, one
after the other: what the first wrote changed the second (a checkpoint made the fixed
run resume halfway; a sample folder it created made ``os.makedirs`` fail). Now each
run starts from the working directory as it was, in a copy of its own:

- its folders are made anew and its files are symbolic links to the user's, so making
  the copy costs no data (a dataset is linked, not copied);
- a file a run creates, or replaces (``os.replace``, ``torch.save`` to a new name),
  stays in that run's copy and goes with the temporary folder; a file written in place
  through its link changes the user's file, as it would without the copy;
- a tree of more than ``MAX_ENTRIES`` entries is copied down to that many, and what
  is deeper is linked whole (a link to the folder: files made inside it are the
  user's); the report says so.

Paths the script builds from its own ``__file__`` point into the user's folder, not
the copy.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

#: Folders and files made in a copy at most; deeper folders are linked whole.
MAX_ENTRIES = 20_000


@dataclass(frozen=True)
class WorkingCopy:
    path: Path
    #: Folders linked whole (the entry budget ran out): files made in them are the user's.
    linked_folders: int = 0


def make_working_copy(source: Path, target: Path, max_entries: int = MAX_ENTRIES) -> WorkingCopy:
    """A copy of ``source`` at ``target``: folders made, files linked, breadth first."""
    target.mkdir(parents=True)
    entries, linked_folders = 0, 0
    pending = deque([(source, target)])
    while pending:
        folder, copy = pending.popleft()
        try:
            children = list(os.scandir(folder))
        except OSError:
            continue  # unreadable: the copy has it empty, as the script would find nothing there
        for child in children:
            made = copy / child.name
            entries += 1
            try:
                if child.is_dir(follow_symlinks=False) and entries <= max_entries:
                    made.mkdir()
                    pending.append((Path(child.path), made))
                    continue
                if child.is_dir(follow_symlinks=False):
                    linked_folders += 1
                made.symlink_to(child.path)  # absolute: a relative link of the user's resolves as it does for them
            except OSError:
                continue
    return WorkingCopy(target, linked_folders)


def describe(copies: list[WorkingCopy], source: Path) -> str:
    """The report's line on where the runs ran."""
    text = (
        f"each run had its own copy of the working directory {source} (files linked, not copied): "
        "what one run wrote, the other did not see"
    )
    linked = max((copy.linked_folders for copy in copies), default=0)
    if linked:
        text += f"; past {MAX_ENTRIES} entries, {linked} folders were linked whole (files made in them are shared)"
    return text
