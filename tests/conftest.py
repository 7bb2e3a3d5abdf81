from __future__ import annotations

import os
import tempfile

import pytest

# The suite runs xlalint, the harness and scripts in many subprocesses. Where
# PYTHONDONTWRITEBYTECODE is set (many containers set it), each compiled xlalint's 100-odd
# modules again: about 0.15 s of CPU a run, half a one-file check. Their bytecode goes to a
# folder of its own in the temp dir instead (never into the tree), shared by the workers.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "xlalint-tests-pycache"))
from support import CUDA_SCRIPT, run_cli


@pytest.fixture
def cuda_script() -> str:
    return CUDA_SCRIPT


@pytest.fixture
def cli():
    return run_cli


def pytest_addoption(parser):
    parser.addoption(
        "--run-editor",
        action="store_true",
        help="also run the tests marked `editor`: a real editor (JupyterLab, code-server) driven by headless Chromium",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-editor"):
        return
    skip = pytest.mark.skip(reason="an editor test (a real browser, minutes): run it with --run-editor")
    for item in items:
        if "editor" in item.keywords:
            item.add_marker(skip)
