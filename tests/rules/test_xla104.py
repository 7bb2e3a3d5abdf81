"""XLA104 cuda-device on whole files: findings, safe and unsafe fixes, idempotence."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, expected_fixed
from xlalint.linter.config import Settings
from xlalint.linter.engine import lint_source
from xlalint.linter.fixing import fix_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "XLA104"
CODE = "XLA104"

# (line, 1-based column, fix applicability or None) of every finding, per fixture.
EXPECTED = {
    "train_cuda": [
        (29, 5, "safe"),  # torch.cuda.synchronize()
        (40, 5, "safe"),  # torch.cuda.manual_seed_all(...)
        (41, 14, "safe"),  # torch.device("cuda" if torch.cuda.is_available() else "cpu")
        (46, 13, "safe"),  # Net().cuda()
        (47, 62, "safe"),  # map_location="cuda:0"
        (50, 75, "safe"),  # map_location=device (a CUDA device)
        (51, 14, "unsafe"),  # GradScaler()
        (52, 34, "safe"),  # device="cuda"
        (58, 17, "safe"),  # y.cuda(non_blocking=True)
        (60, 18, "unsafe"),  # autocast()
        (69, 9, "safe"),  # torch.cuda.empty_cache()
    ],
    "aliases": [
        (6, 10, "safe"),  # DEVICE = "cuda:0", used as a device in build()
        (10, 5, "safe"),  # tc.manual_seed
        (11, 5, "safe"),  # cuda.set_device
        (12, 5, "safe"),  # T.cuda.synchronize
        (17, 32, "safe"),  # device=0
        (18, 27, "safe"),  # .to(0)
        (22, 14, "unsafe"),  # mixed.GradScaler()
        (23, 10, "unsafe"),  # mixed.autocast("cuda", ...)
        (24, 20, "safe"),  # x.cuda()
        (28, 12, "safe"),  # T.device(0)
        (28, 25, "safe"),  # T.device(type="cuda", index=1)
    ],
    "noqa": [
        (3, 9, "safe"),  # a suppression of E501 does not hide XLA104
        (10, 27, "safe"),  # nor does one of XLA102
    ],
    "self_scaler": [
        (7, 22, "safe"),  # model.cuda()
        (9, 23, "unsafe"),  # self.scaler = torch.amp.GradScaler("cuda", ...)
        (13, 14, "unsafe"),  # torch.autocast(device_type="cuda", ...)
        (14, 40, "safe"),  # batch.to("cuda", ...)
    ],
    "not_flagged": [],
}


def settings() -> Settings:
    return Settings()


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    findings = [f for f in lint_source(read(f"{case}.py"), f"{case}.py", settings()) if f.code == CODE]
    got = [(f.span.line, f.span.col + 1, f.fix.applicability if f.fix else None) for f in findings]
    assert got == EXPECTED[case]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fix(case, unsafe):
    assert_fixes_to(
        CODE,
        read(f"{case}.py"),
        f"{case}.py",
        expected_fixed(FIXTURES, case, unsafe),
        unsafe=unsafe,
        settings=settings(),
    )


def test_training_script_is_fully_ported():
    """With unsafe fixes the CUDA training script has no XLA104 finding left, and no
    CUDA API: the device, seeding, autocast, scaler and map_location are all XLA's."""
    result = fix_source(read("train_cuda.py"), "train_cuda.py", settings(), unsafe=True, select=[CODE])
    assert result.error is None
    assert [f for f in result.remaining if f.code == CODE] == []
    tree = ast.parse(result.source)
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not attributes & {"cuda", "synchronize", "empty_cache", "manual_seed_all", "scale", "unscale_", "update"}
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert "cuda" not in strings and "cuda:0" not in strings
    assert "import torch_xla\n" in result.source
    assert "import torch_xla.core.xla_model as xm\n" in result.source


def test_safe_fix_leaves_the_scaler():
    """The scaler and autocast are unsafe fixes: `xlalint fix` alone keeps them."""
    result = fix_source(read("train_cuda.py"), "train_cuda.py", settings(), select=[CODE])
    assert "scaler = GradScaler()" in result.source
    remaining = [f for f in result.remaining if f.code == CODE]
    # Two import lines were added above them.
    assert [(f.span.line, f.fix.applicability) for f in remaining] == [(53, "unsafe"), (62, "unsafe")]


def test_old_target_uses_xla_device_and_set_rng_state():
    old = Settings(target_version=(2, 3))
    result = fix_source(read("aliases.py"), "aliases.py", old, select=[CODE])
    assert result.error is None
    assert "torch_xla.device()" not in result.source
    assert "DEVICE = xm.xla_device()" in result.source
    assert "xm.set_rng_state(seed)" in result.source
    assert "import torch_xla.core.xla_model as xm\n" in result.source


def test_noqa_for_another_code_does_not_hide():
    source = "import torch\nmodel = Net().cuda()  # noqa: E501\n"
    assert [f.code for f in lint_source(source, "x.py", settings())] == [CODE]
    source = "import torch\nmodel = Net().cuda()  # noqa: XLA104\n"
    assert [f.code for f in lint_source(source, "x.py", settings()) if f.code == CODE] == []


def test_scaler_removal_with_every_rule():
    """XLA106 inserts `scaler.unscale_(opt)` before an unguarded clip in the same pass
    as the scaler is removed: the result must not keep a dangling `scaler`."""
    source = (
        "import torch\n"
        "import torch_xla\n"
        "\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
        "for x, y in loader:\n"
        "    loss = model(x)\n"
        "    scaler.scale(loss).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    scaler.step(opt)\n"
        "    scaler.update()\n"
        "    torch_xla.sync()\n"
    )
    result = fix_source(source, "train.py", settings(), unsafe=True)
    assert result.error is None, result.error
    assert "scaler" not in result.source
    assert "    loss.backward()\n" in result.source
    assert "    opt.step()\n" in result.source
