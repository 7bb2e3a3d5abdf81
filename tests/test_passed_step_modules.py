"""Issue 38 §1 across modules: DeiT's `main.py` builds the loss scaler and passes it to
`train_one_epoch` of `engine.py`, whose loop calls it (`loss_scaler(loss, optimizer,
...)`). Nothing in `engine.py` binds the parameter, so alone its loop trains nothing;
as part of the program, `main.py` tells it what it passes (``analysis/told.py``:
``"train_one_epoch(5=update)"``) and the loop is a step loop there: XLA103 (no sync),
XLA102 (the `.item()` of the loss), whichever way the program is checked."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlalint.analysis import told
from xlalint.cli import app
from xlalint.engine import follow
from xlalint.engine.config import Settings
from xlalint.engine.lint import iterated_imports, lint_source

FIXTURE = Path(__file__).parent / "fixtures" / "XLA103" / "passed_scaler_module"
MAIN = (FIXTURE / "main.py").read_text()
ENGINE = (FIXTURE / "engine.py").read_text()
# The loop without a sync, the per-step read of the loss.
EXPECTED = [("engine.py", 8, 5, "XLA103"), ("engine.py", 10, 22, "XLA102")]
SCALER_CLASS = MAIN[MAIN.index("class Scaler:") : MAIN.index("def main():")]


@pytest.fixture
def program(tmp_path, monkeypatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    shutil.copy(FIXTURE / "main.py", tmp_path / "main.py")
    shutil.copy(FIXTURE / "engine.py", tmp_path / "engine.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def found(*args: str) -> list[tuple[str, int, int, str]]:
    result = run("check", "--output-format", "json", "--select", "XLA102,XLA103", *args)
    return [
        (os.path.relpath(f["filename"]), f["location"]["row"], f["location"]["column"], f["code"])
        for f in json.loads(result.stdout)
    ]


@pytest.mark.parametrize("target", [".", "main.py"], ids=["folder", "script"])
def test_the_loop_calling_the_passed_scaler_is_a_step_loop(program, target):
    assert found("--no-cache", target) == EXPECTED
    # Alone, or not following imports, engine.py's parameter is bound by no call.
    assert found("--no-cache", "engine.py") == []
    assert found("--no-cache", "--no-follow-imports", "main.py", "engine.py") == []


def timm_scaler(script: str) -> str:
    script = script.replace("from engine import", "from timm.utils import NativeScaler\nfrom engine import")
    return script.replace(SCALER_CLASS, "").replace("loss_scaler = Scaler()", "loss_scaler = NativeScaler()")


def backward_only(script: str) -> str:
    """A function that runs the backward only, passed by name (the loop steps no
    optimizer then: the same step loop)."""
    function = "def backward_only(loss, optimizer, parameters=None):\n    loss.backward()\n\n\n"
    return script.replace(SCALER_CLASS, function).replace("epoch, loss_scaler)", "epoch, backward_only)")


@pytest.mark.parametrize(
    "passing",
    [
        timm_scaler,
        lambda script: timm_scaler(script).replace("epoch, loss_scaler)", "epoch, NativeScaler())"),
        lambda script: script.replace("epoch, loss_scaler)", "epoch, loss_scaler=loss_scaler)"),
        lambda script: script.replace("epoch, loss_scaler)", "epoch, Scaler())"),
        backward_only,
    ],
    ids=["timm", "timm-in-the-call", "keyword", "in-the-call", "function"],
)
def test_what_main_may_pass(program, passing):
    script = passing(MAIN)
    assert script != MAIN
    (program / "main.py").write_text(script)
    assert found("--no-cache", "main.py") == EXPECTED, script
    assert found("--no-cache", ".") == EXPECTED


def test_an_object_whose_call_runs_no_backward_tells_nothing(program):
    (program / "main.py").write_text(
        MAIN.replace("        loss.backward()\n", "").replace("        optimizer.step()\n", "        print(loss)\n")
    )
    assert found("--no-cache", "main.py") == []
    assert found("--no-cache", ".") == []


def test_passed_on_within_the_module_and_through_a_module_between(program):
    """`engine.py` passes the parameter on to its own helper, which calls it; and the
    script passes its scaler to `trainer.fit`, which passes it to `engine.py` (a round
    more: `trainer.py` is told, and tells on what it was told)."""
    (program / "engine.py").write_text(
        ENGINE.replace(
            "        loss_scaler(loss, optimizer, parameters=model.parameters())\n",
            "        update(loss, optimizer, model, loss_scaler)\n",
        )
        + "\n\ndef update(loss, optimizer, model, scaler):\n    scaler(loss, optimizer, parameters=model.parameters())\n"
    )
    assert found("--no-cache", "main.py") == EXPECTED
    (program / "trainer.py").write_text(
        "from engine import train_one_epoch\n\n\n"
        "def fit(model, data, optimizer, device, scaler):\n"
        "    for epoch in range(2):\n"
        "        train_one_epoch(model, data, optimizer, device, epoch, scaler)\n"
    )
    (program / "main.py").write_text(
        MAIN.replace("from engine import train_one_epoch", "from trainer import fit").replace(
            "    for epoch in range(2):\n        train_one_epoch(model, data, optimizer, device, epoch, loss_scaler)\n",
            "    fit(model, data, optimizer, device, loss_scaler)\n",
        )
    )
    assert found("--no-cache", "main.py") == EXPECTED
    assert found("--no-cache", ".") == EXPECTED


def test_a_package_that_re_exports_the_function_tells_it_on(program):
    package = program / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .engine import train_one_epoch\n")
    (program / "engine.py").rename(package / "engine.py")
    (program / "main.py").write_text(MAIN.replace("from engine import", "from pkg import"))
    expected = [(os.path.join("pkg", name), *rest) for name, *rest in EXPECTED]
    assert found("--no-cache", "main.py") == expected
    assert found("--no-cache", ".") == expected


def test_the_fix_syncs_after_the_passed_scaler_in_the_imported_module(program):
    fixed = run("fix", "--no-cache", "main.py")
    assert fixed.exit_code == 1, fixed.stdout  # the `.item()` is left to the user
    text = (program / "engine.py").read_text()
    assert "import torch_xla\n" in text
    assert "        loss_scaler(loss, optimizer, parameters=model.parameters())\n        torch_xla.sync()\n" in text
    assert (program / "main.py").read_text() == MAIN
    assert found("--no-cache", "main.py") == [("engine.py", 11, 22, "XLA102")]


def test_a_warm_check_follows_what_the_script_now_passes(program):
    an_hour_ago = time.time() - 3600
    for path in program.glob("*.py"):
        os.utime(path, (an_hour_ago, an_hour_ago))
    assert found(".") == EXPECTED  # cold
    assert found(".") == EXPECTED  # warm
    assert found("main.py") == EXPECTED
    # The script now passes a scaler that runs no backward: engine.py, unchanged, is
    # told nothing, and its entry told otherwise is not the answer.
    (program / "main.py").write_text(MAIN.replace("loss_scaler = Scaler()", "loss_scaler = print"))
    assert found(".") == []
    assert found("main.py") == []
    (program / "main.py").write_text(MAIN)
    assert found(".") == EXPECTED


def test_the_engine_api_a_language_server_calls(program):
    """What the language server passes on unchanged: ``told_by`` of the script's text,
    ``program_settings`` of the module from the open documents."""
    settings = Settings()
    main, engine = str(program / "main.py"), str(program / "engine.py")
    assert iterated_imports(MAIN, main, settings) == [(0, "engine.train_one_epoch(5=update)")]
    assert follow.told_by(MAIN, main, settings) == {os.path.realpath(engine): ("train_one_epoch(5=update)",)}
    module_settings = follow.program_settings(engine, settings, [(main, MAIN), (engine, ENGINE)])
    assert module_settings.iterated_by_importers == ("train_one_epoch(5=update)",)
    findings = lint_source(ENGINE, engine, module_settings, select=["XLA102", "XLA103"])
    assert [("engine.py", f.span.line, f.span.col + 1, f.code) for f in findings] == EXPECTED
    assert lint_source(ENGINE, engine, settings, select=["XLA102", "XLA103"]) == []


def test_the_facts_read_back_as_they_were_made():
    assert told.parse_bound(told.bound_fact("train_one_epoch", 5, told.UPDATE)) == ("train_one_epoch", 5, "update")
    assert told.parse_bound(told.bound_fact("fit", "step_fn", told.BACKWARD)) == ("fit", "step_fn", "backward")
    for other in ("prepare_dataloader", "f(1=jump)", "f(x-y=update)", "f(1=update", "(1=update)", "f(=update)"):
        assert told.parse_bound(other) is None, other
    assert told.function_of("f(1=update)") == told.function_of("f") == "f"
    assert told.suffix_of("f(1=update)") == "(1=update)" and told.suffix_of("f") == ""
