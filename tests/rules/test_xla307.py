"""XLA307 growing-sequence-loop on whole scripts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import run_cli

from rules.fixture_checks import fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA307"
CODE = "XLA307"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # generate()'s `idx` fed to `self`, and sample()'s `out` fed to `model.forward`; not
    # `history`, which grows too but never reaches the model.
    "sample_gpt": [(27, 19, CODE), (39, 15, CODE)],
    # A batch rebound from the loader (or by `next()`) every iteration, then doubled: no finding.
    "rebound_batches": [],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


def test_the_local_module_of_an_xla_script_is_checked_as_part_of_the_xla_program(tmp_path):
    for path in (FIXTURES.parent / "XLA308" / "program").glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "pyproject.toml").write_text("")
    checked = [
        (Path(f["filename"]).name, f["location"]["row"])
        for script in ("sample_xla.py", "sample_cpu.py", "model.py")
        for f in json.loads(
            run_cli("check", "--no-cache", "--select", CODE, "--output-format", "json", script, cwd=tmp_path).stdout
        )
    ]
    assert checked == [("model.py", 24)]  # from sample_xla.py only
