"""The reference run of ``--compare``: the original on plain CPU, as a user would try it.

It is the user's own script, unfixed, with CUDA hidden (``CUDA_VISIBLE_DEVICES=""``) and
without XLA: the bootstrap never imports torch_xla, so a script that picks
``"cuda" if torch.cuda.is_available() else "cpu"`` trains on the CPU. Its per-step loss
is the one the fixed script's must track (see ``verdict``). A script that calls
``.cuda()`` unconditionally fails here; the report says why in one line and goes on.
A program that imports torch_xla itself has no plain-CPU form: its reference is skipped.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from xlalint.harness.environment import Device
from xlalint.harness.prepare import ScriptVersion

LABEL = "reference"
DESCRIPTION = "reference (the original on CPU, CUDA hidden, no XLA)"
#: CUDA hidden; PJRT_DEVICE only matters to a script that imports torch_xla on its own.
#: USE_TORCH_XLA=0: transformers and accelerate pick the XLA device by themselves
#: wherever torch_xla is installed (an HF Trainer script would run its reference on XLA).
DEVICE = Device("CPU", {"CUDA_VISIBLE_DEVICES": "", "PJRT_DEVICE": "CPU", "USE_TORCH_XLA": "0"})


def reference_version(original: ScriptVersion) -> ScriptVersion | str:
    """The original, to run without XLA; or why it cannot be (a reason to report)."""
    for file in original.files():
        if imports_torch_xla(file.source):
            return f"{file.display_path} imports torch_xla itself: the original has no plain-CPU form"
    # `native`: plain PyTorch (no XLA metrics expected, none of their warnings).
    return replace(original, label=LABEL, description=DESCRIPTION, native=True)


def imports_torch_xla(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch_xla" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch_xla":
            return True
    return False
