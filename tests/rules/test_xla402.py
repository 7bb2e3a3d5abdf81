"""XLA402 removed-api on whole scripts, and the API table checked against the
installed torch_xla."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, fixture_positions
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.rules._api_versions import API_CHANGES, TRACKED_ROOTS, parse_version

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA402"
CODE = "XLA402"

# case -> the (line, column, code) of every finding at the default target (2.9).
EXPECTED = {
    # torch_xla 1.x MNIST: each xrt_world_size()/get_ordinal() call (removed in 2.7).
    "mp_mnist_legacy": [(28, 28, CODE), (28, 54, CODE), (33, 57, CODE), (41, 33, CODE)],
    # The pre-1.0 package (each import) and PJRT_DEVICE=GPU.
    "pre_1_0": [(6, 8, CODE), (7, 8, CODE), (8, 1, CODE), (11, 5, CODE)],
    # XLA:CUDA AMP: the GradScaler import and construction, PJRT_DEVICE=CUDA.
    "amp_cuda": [(8, 27, CODE), (10, 1, CODE), (17, 14, CODE)],
}


def findings(source: str, path: str = "f.py", target: tuple[int, int] = (2, 9)):
    settings = Settings(target_version=target)
    return [f for f in lint_source(source, path, settings, select=[CODE]) if f.code == CODE]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_fixed_files_are_clean():
    assert findings((FIXTURES / "mp_mnist_legacy.fixed.py").read_text()) == []


def test_without_a_replacement_there_is_no_fix():
    found = findings((FIXTURES / "amp_cuda.py").read_text())
    assert all(f.fix is None for f in found)
    assert "autocast to bfloat16" in found[0].message
    assert "PJRT CUDA plugin" in found[1].message


@pytest.mark.parametrize(
    ("target", "count"),
    [((2, 6), 0), ((2, 7), 4), ((2, 9), 4)],
)
def test_target_version(target, count):
    assert len(findings((FIXTURES / "mp_mnist_legacy.py").read_text(), target=target)) == count


def test_xla_cuda_is_removed_only_from_2_9():
    source = (FIXTURES / "amp_cuda.py").read_text()
    assert findings(source, target=(2, 8)) == []
    assert len(findings(source, target=(2, 9))) == 3


def test_both_version_rules_together_give_a_script_for_2_9():
    """XLA401 and XLA402 fixed in one run: nothing of either is left, and a second fix is a no-op."""
    source = (FIXTURES / "mp_mnist_legacy.py").read_text()
    select = ["XLA401", "XLA402"]
    result = fix_source(source, "f.py", Settings(), select=select)
    assert result.error is None
    for old in ("xla_device", "mark_step", "xrt_world_size", "get_ordinal"):
        assert f"xm.{old}" not in result.source
    assert "torch_xla.device()" in result.source
    assert "xr.world_size()" in result.source
    assert [f for f in lint_source(result.source, "f.py", Settings(), select=select) if f.code in select] == []
    assert fix_source(result.source, "f.py", Settings(), select=select).source == result.source


# -- the table ------------------------------------------------------------------------------


def test_table_rows_are_consistent():
    names = [change.name for change in API_CHANGES]
    assert len(names) == len(set(names))
    for change in API_CHANGES:
        assert change.deprecated or change.removed, change.name
        if change.deprecated and change.removed:
            assert parse_version(change.deprecated) <= parse_version(change.removed), change.name
        if change.rename_when is not None:
            assert change.replacement is not None, change.name

    # A name is a tracked row only through an import of these packages (the rules skip
    # the per-name work of a file that binds none).
    assert all(change.name.split(".")[0] in TRACKED_ROOTS for change in API_CHANGES if change.kind == "object")


def test_a_file_taken_as_importing_torch_xla_binds_no_tracked_name():
    """The check of what the port makes a CUDA script takes torch_xla as imported (the
    findings after the port): no name of it is torch_xla's, so no name is looked up."""
    import ast

    from xlalint.analysis.semantic import attach_parents
    from xlalint.engine.context import Context
    from xlalint.rules.xla401_deprecated_api import DeprecatedApi

    source = "import torch\nx = torch.ones(2).cuda()\n"
    tree = ast.parse(source)
    ctx = Context(source, "t.py", tree, Settings(), attach_parents(tree))
    ctx.semantic.imports.imported_modules.add("torch_xla")
    rule = DeprecatedApi(ctx)
    rule.begin()
    assert {ast.Name, ast.Attribute} <= rule.skipped_visits
    source = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"
    tree = ast.parse(source)
    rule = DeprecatedApi(Context(source, "t.py", tree, Settings(), attach_parents(tree)))
    rule.begin()
    assert ast.Name not in rule.skipped_visits


_PROBE = r"""
import importlib, json, sys
def exists(name):
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False
def deprecated(name):
    module, _, attr = name.rpartition(".")
    obj = getattr(importlib.import_module(module), attr)
    return hasattr(obj, "__deprecated__")
rows = json.loads(sys.argv[1])
print(json.dumps({n: [exists(n), exists(r) if r else None, deprecated(n) if k == "object" and exists(n) else None]
                  for n, r, k in rows}))
"""


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None, reason="torch_xla is not installed")
@pytest.mark.slow
def test_table_matches_the_installed_torch_xla():
    """For the installed release (2.9): removed names are gone, deprecated ones exist
    and carry ``@deprecated``, every replacement exists."""
    from importlib.metadata import version

    installed = parse_version(version("torch_xla"))
    rows = [(c.name, c.replacement, c.kind) for c in API_CHANGES if c.kind != "env"]
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(rows)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PJRT_DEVICE": "CPU", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    for change in API_CHANGES:
        if change.kind == "env":
            continue
        exists, replacement_exists, is_deprecated = facts[change.name]
        status = change.status(installed)
        if status == "removed":
            assert not exists, f"{change.name} still exists in torch_xla {installed}"
        elif status == "deprecated":
            assert exists, change.name
            if change.kind == "object":
                assert is_deprecated, f"{change.name} is not @deprecated in torch_xla {installed}"
        if change.replacement is not None and not change.replacement.startswith("torch_xla_py"):
            assert replacement_exists, f"{change.replacement} (for {change.name}) is missing"
