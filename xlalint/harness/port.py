"""The port run of ``--compare``: the original with XLA104's safe fixes only.

It is the script as a newcomer first runs it on XLA: its CUDA calls ported to the XLA
device and nothing else (no sync per step, no unsafe rewrites of autocast or the
scaler, whatever ``--unsafe-fixes`` says). The fixed run's cost is measured against
it (see ``verdict``); a run that the fix breaks where the port ran is what ``bisect``
looks into. A script with nothing to port runs as it is.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from xlalint.engine.lint import PORT_CODE
from xlalint.harness import prepare

LABEL = "port"
DESCRIPTION = "port (the original with XLA104's safe fixes)"


def port_version(
    original: prepare.ScriptVersion, user_files: list[prepare.UserFile], workdir: Path
) -> prepare.ScriptVersion:
    version = prepare.fixed_version(
        original,
        user_files,
        workdir,
        label=LABEL,
        folder=LABEL,
        unsafe=False,
        select=[PORT_CODE],
        description=DESCRIPTION,
    )
    if not any(file.changed for file in version.files()):
        return replace(original, label=LABEL, description="port (the original: nothing to port)")
    return version
