from __future__ import annotations

import pytest
from support import CUDA_SCRIPT, run_cli


@pytest.fixture
def cuda_script() -> str:
    return CUDA_SCRIPT


@pytest.fixture
def cli():
    return run_cli
