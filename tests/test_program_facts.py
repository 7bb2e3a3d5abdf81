"""What a script tells the local modules it imports (issue 38): `train.py`'s step loop
iterates what `data.prepare_dataloader(32)` returns, so the `DataLoader` that helper
builds in `data.py` is a training loader there (XLA301 at that line, its fix in that
file), whichever way the program is checked (the folder, or the script alone), and the
cache of `data.py`'s findings depends on what `train.py` says."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlalint.analysis import project
from xlalint.cli import app
from xlalint.engine import follow
from xlalint.engine.config import Settings
from xlalint.engine.lint import iterated_imports, lint_source

FIXTURE = Path(__file__).parent / "fixtures" / "XLA301" / "helper_module"
DATA = (FIXTURE / "data.py").read_text()
TRAIN = (FIXTURE / "train.py").read_text()
DATA_FIXED = (FIXTURE / "data.unsafe.py").read_text()
# The training loader `prepare_dataloader` returns; not the evaluation loader.
EXPECTED = [("data.py", 14, 12, "XLA301")]


@pytest.fixture
def program(tmp_path, monkeypatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    shutil.copy(FIXTURE / "data.py", tmp_path / "data.py")
    shutil.copy(FIXTURE / "train.py", tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def found(*args: str) -> list[tuple[str, int, int, str]]:
    result = run("check", "--output-format", "json", *args)
    return [
        (os.path.relpath(f["filename"]), f["location"]["row"], f["location"]["column"], f["code"])
        for f in json.loads(result.stdout)
    ]


@pytest.mark.parametrize("target", [".", "train.py"], ids=["folder", "script"])
def test_the_helper_s_loader_is_reported_where_it_is_built(program, target):
    assert found("--no-cache", target) == EXPECTED
    # Alone, data.py has no step loop and no name saying "train": nothing to say.
    assert found("--no-cache", "data.py") == []


@pytest.mark.parametrize("target", [".", "train.py"], ids=["folder", "script"])
def test_the_unsafe_fix_is_written_into_the_helper_s_module(program, target):
    assert run("fix", "--no-cache", target).exit_code == 1  # the fix is unsafe: nothing written
    assert (program / "data.py").read_text() == DATA
    fixed = run("fix", "--no-cache", "--unsafe-fixes", target)
    assert fixed.exit_code == 0, fixed.stdout
    assert (program / "data.py").read_text() == DATA_FIXED
    assert (program / "train.py").read_text() == TRAIN
    again = run("fix", "--no-cache", "--unsafe-fixes", target)
    assert again.exit_code == 0 and "All checks passed!" in again.stdout
    assert (program / "data.py").read_text() == DATA_FIXED


def test_only_a_step_loop_tells_and_only_when_imports_are_followed(program):
    # The XLA script iterates the helper's result in an evaluation loop only.
    (program / "train.py").write_text(TRAIN.replace("for x, y in loader:", "for x, y in []:"))
    assert found("--no-cache", "train.py") == []
    # Not following imports, the files are checked alone.
    (program / "train.py").write_text(TRAIN)
    assert found("--no-cache", "--no-follow-imports", "train.py", "data.py") == []


def test_a_warm_check_follows_what_the_script_now_says(program):
    an_hour_ago = time.time() - 3600
    for path in program.glob("*.py"):
        os.utime(path, (an_hour_ago, an_hour_ago))
    assert found(".") == EXPECTED  # cold
    entries = [p for p in (program / ".xlalint_cache").glob("??/*") if not p.name.startswith(".")]
    assert len(entries) == 3  # train.py; data.py checked alone, and told by train.py
    stamps = [json.loads(p.read_bytes())["file"] for p in entries]
    assert [s["iterated"] for s in stamps if s["path"] == "train.py"] == [[[0, "data.prepare_dataloader"]]]
    assert found(".") == EXPECTED  # warm: every file answered from the cache
    assert found("train.py") == EXPECTED
    # The script no longer loops over the helper's loader: data.py, unchanged, has no
    # training loader any more, and its entry told otherwise is not the answer.
    (program / "train.py").write_text(TRAIN.replace("loader = prepare_dataloader(32)", "loader = [(x, x)]"))
    assert found(".") == []
    assert found("train.py") == []
    # Told again (the old text back): both entries are there to answer.
    (program / "train.py").write_text(TRAIN)
    assert found(".") == EXPECTED


def test_a_module_imported_as_a_module_and_a_later_importer_tell_too(program):
    """`import data` then `data.prepare_dataloader(32)`; and the loop in `trainer.py`,
    imported by the script with `data.py` in the same round (`data.py` is checked
    before `trainer.py` says anything about it)."""
    (program / "trainer.py").write_text(
        "import torch_xla\n"
        "import data\n\n\n"
        "def fit(model, opt):\n"
        "    for x, y in data.prepare_dataloader(8):\n"
        "        model(x).sum().backward()\n"
        "        opt.step()\n"
        "        torch_xla.sync()\n"
    )
    (program / "train.py").write_text("import torch_xla\nimport data\nimport trainer\n\ntrainer.fit(None, None)\n")
    assert found("--no-cache", "train.py") == EXPECTED
    assert found("--no-cache", ".") == EXPECTED


@pytest.mark.parametrize(
    ("imports", "call"),
    [("from .data import prepare_dataloader", "prepare_dataloader"), ("from . import data", "data.prepare_dataloader")],
)
def test_a_relative_import_in_a_package_tells_too(program, imports, call):
    package = program / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (program / "data.py").rename(package / "data.py")
    script = TRAIN.replace("from data import prepare_dataloader, prepare_eval_loader", imports)
    script = script.replace("prepare_dataloader(32)", f"{call}(32)").replace("\nwith torch.no_grad():", "\nif 0:")
    (package / "train.py").write_text(script)
    (program / "train.py").unlink()
    assert found("--no-cache", "pkg/train.py") == [("pkg/data.py", 14, 12, "XLA301")]
    assert found("--no-cache", ".") == [("pkg/data.py", 14, 12, "XLA301")]


def test_a_package_that_re_exports_the_helper_tells_it_on(program):
    package = program / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .data import prepare_dataloader, prepare_eval_loader\n")
    (program / "data.py").rename(package / "data.py")
    (program / "train.py").write_text(TRAIN.replace("from data import", "from pkg import"))
    assert found("--no-cache", "train.py") == [("pkg/data.py", 14, 12, "XLA301")]
    assert found("--no-cache", ".") == [("pkg/data.py", 14, 12, "XLA301")]


def test_what_a_told_module_iterates_of_another_is_told_on(program):
    """`prepare_dataloader` returns what `loaders.make_loader` builds: `data.py`, told by
    `train.py`, tells `loaders.py` in turn (a round more), from either entry point."""
    (program / "loaders.py").write_text(
        "from torch.utils.data import DataLoader\n\n\n"
        "def make_loader(ds, bs):\n"
        "    return DataLoader(ds, batch_size=bs, shuffle=True)\n"
    )
    (program / "data.py").write_text(
        "import torch\nfrom torch.utils.data import TensorDataset\nfrom loaders import make_loader\n\n\n"
        "def prepare_dataloader(batch_size):\n"
        "    return make_loader(TensorDataset(torch.randn(100, 4)), batch_size)\n\n\n"
        "def prepare_eval_loader(batch_size):\n"
        "    return make_loader(TensorDataset(torch.randn(10, 4)), batch_size)\n"
    )
    assert found("--no-cache", "train.py") == [("loaders.py", 5, 12, "XLA301")]
    assert found("--no-cache", ".") == [("loaders.py", 5, 12, "XLA301")]
    assert found(".") == found(".") == [("loaders.py", 5, 12, "XLA301")]  # cold, then warm
    assert run("fix", "--unsafe-fixes", "train.py").exit_code == 0
    assert "shuffle=True, drop_last=True)" in (program / "loaders.py").read_text()


def test_the_engine_api_a_language_server_calls(program):
    """What the language server needs to check `data.py` as part of the program: what
    `train.py`'s text tells the modules it imports (by real path), and the settings that
    carry it into `data.py`'s check."""
    settings = Settings()
    specs = iterated_imports(TRAIN, str(program / "train.py"), settings)
    assert specs == [(0, "data.prepare_dataloader")]
    told = follow.told_by(TRAIN, str(program / "train.py"), settings)
    assert told == project.resolve_functions(specs, str(program / "train.py"), None, None)
    assert told == {os.path.realpath(program / "data.py"): ("prepare_dataloader",)}
    module_settings = follow.in_program(settings, told[os.path.realpath(program / "data.py")])
    findings = lint_source(DATA, str(program / "data.py"), module_settings, select=["XLA301"])
    assert [(f.span.line, f.span.col + 1) for f in findings] == [(14, 12)]
    assert lint_source(DATA, str(program / "data.py"), settings, select=["XLA301"]) == []
    # Both in one call, from the (path, text) of the documents that may import it.
    data_path = str(program / "data.py")
    documents = [(str(program / "train.py"), TRAIN), (data_path, DATA), (str(program / "other.py"), "import torch\n")]
    told_settings = follow.program_settings(data_path, settings, documents)
    assert (told_settings.xla_program, told_settings.iterated_by_importers) == (True, ("prepare_dataloader",))
    assert lint_source(DATA, data_path, told_settings, select=["XLA301"]) == findings
    # A script that no longer iterates it: part of the XLA program, told nothing.
    quiet = follow.program_settings(
        data_path, settings, [(str(program / "train.py"), TRAIN.replace("in loader", "in []"))]
    )
    assert (quiet.xla_program, quiet.iterated_by_importers) == (True, ())
    assert follow.program_settings(data_path, settings, documents[1:]) is settings


def test_what_a_file_tells_survives_the_cache_entry_and_nothing_else_does():
    from xlalint.engine import findings_json

    stamp = findings_json.FileStamp("a.py", 10, 20, "0" * 64, (), True, ((0, "data.prepare_dataloader"),))
    assert findings_json.loads(findings_json.dumps("k", stamp, []), "k") == (stamp, [])
    for bad in ([[0]], [["0", "data.f"]], [[True, "data.f"]], [[0, 1]], "data.f", [[-1, "data.f"]]):
        entry = json.loads(findings_json.dumps("k", stamp, []))
        entry["file"]["iterated"] = bad
        with pytest.raises(findings_json.InvalidEntry):
            findings_json.loads(json.dumps(entry).encode(), "k")


def test_at_run_time_the_fix_in_the_helper_s_module_saves_the_partial_batch_s_compile(program):
    """`xlalint run` fixes data.py as `fix` does, and the fixed program compiles its step
    once: the port compiles it again for the last batch of 4 (100 = 3 * 32 + 4)."""
    from support import run_cli

    result = run_cli("run", "--compare", "--unsafe-fixes", "--json", "out.json", "train.py", cwd=program)
    assert result.returncode in (0, 1), result.stderr.decode()[-2000:]
    report = json.loads((program / "out.json").read_text())
    assert report["local_modules"] == ["data.py"]
    assert "+    return DataLoader(ds, batch_size=batch_size, shuffle=True, drop_last=True)" in report["fix_diff"]
    fixed, port = report["runs"]["fixed"], report["runs"]["port"]
    assert fixed["exit_code"] == port["exit_code"] == 0
    assert fixed["compiles"] == port["compiles"] - 1
