"""The entry point's own reading of a plain ``check`` (``cli.plain_check``, run without
typer) gives ``cli_run.run`` exactly what the typer app gives it, and leaves everything
else to the app."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from xlalint import cli, cli_app

PLAIN = [
    (["check"], {}),
    (["check", "a.py", ""], {}),
    (["check", "--force-exclude", "--no-follow-imports", "--", "a.py", "-b.py", "--", "-"], {}),
    (["check", "a.py", "--select", "XLA1,XLA2", "--select", "", "--ignore=XLA104", "--extend-select", "xla3"], {}),
    (["check", "--output-format", "json", "--output-format=sarif", "x.py", "y"], {}),
    (["check", "-q", "--quiet", "--exit-zero", "--no-cache", "--statistics", "--show-fixes", "--isolated"], {}),
    (["check", "--exit-non-zero-on-fix", "--unsafe-fixes", "--no-unsafe-fixes", "--follow-imports", "d/"], {}),
    (
        ["check", "--config", "select = ['XLA1']", "--config=pyproject.toml", "--exclude", "a,b", "--extend-exclude=c"],
        {},
    ),
    (["check", "--target-version", "2.9", "--target-runtime=torch-tpu", "--target-version", "2.8"], {}),
    (["check", "a.py"], {"XLALINT_OUTPUT_FORMAT": "json-lines"}),
    (["check", "--output-format", "concise", "a.py"], {"XLALINT_OUTPUT_FORMAT": "json"}),
    (["check", "a.py"], {"XLALINT_OUTPUT_FORMAT": ""}),
]

# Each for the app to read: help, other commands, options the quick parse does not know,
# values click would take or refuse, stdin, a shell's completion request.
NOT_PLAIN = [
    ([], {}),
    (["--version"], {}),
    (["fix", "a.py"], {}),
    (["rule", "--all"], {}),
    (["check", "--help"], {}),
    (["check", "-h"], {}),
    (["check", "-"], {}),
    (["check", "--stdin-filename", "a.py"], {}),
    (["check", "--fix", "a.py"], {}),
    (["check", "--diff", "a.py"], {}),
    (["check", "--watch", "a.py"], {}),
    (["check", "-qw", "a.py"], {}),
    (["check", "--exit-zero=1", "a.py"], {}),
    (["check", "--no-cach", "a.py"], {}),
    (["check", "--select"], {}),
    (["check", "--select", "--ignore", "XLA1"], {}),
    (["check", "--output-format", "nope", "a.py"], {}),
    (["check", "--output-format", "json_lines", "a.py"], {}),
    (["check", "a.py"], {"XLALINT_OUTPUT_FORMAT": "nope"}),
    (["check", "a.py"], {"_XLALINT_COMPLETE": "bash_source"}),
]


def app_arguments(args: list[str], env: dict[str, str], monkeypatch) -> dict:
    """What the typer app's ``check`` passes to ``cli_run.run`` for ``args``."""
    seen = []
    monkeypatch.setattr(cli_app, "run", lambda paths, **kwargs: seen.append({"paths": paths, **kwargs}))
    monkeypatch.delenv("XLALINT_OUTPUT_FORMAT", raising=False)
    result = CliRunner().invoke(cli_app.app, args, env=env)
    assert result.exit_code == 0, result.output
    (arguments,) = seen
    return arguments


@pytest.mark.parametrize(("args", "env"), PLAIN, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_a_plain_check_is_read_as_the_app_reads_it(args, env, monkeypatch):
    assert cli.plain_check(args, env) == app_arguments(args, env, monkeypatch)


@pytest.mark.parametrize(("args", "env"), NOT_PLAIN, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_anything_else_is_left_to_the_app(args, env):
    assert cli.plain_check(args, env) is None


def test_the_quick_parse_knows_each_option_as_the_app_has_it():
    """Every option it reads is one of the app's ``check`` options, of the same kind: a
    flag (and its ``--no-`` side), repeatable, or one value."""
    command = typer.main.get_command(cli_app.app).commands["check"]
    options = {}
    for param in command.params:
        if param.param_type_name != "option":
            continue  # the files
        for name in param.opts:
            options[name] = (param.name, "flag" if param.is_flag else "list" if param.multiple else "value", True)
        for name in param.secondary_opts:
            options[name] = (param.name, "flag", False)
    renamed = {"unsafe_fixes": "unsafe"}  # check passes --unsafe-fixes as run's `unsafe`
    for name, (key, value) in cli.FLAGS.items():
        param, kind, on = options[name]
        assert (renamed.get(param, param), kind, on) == (key, "flag", value), name
    for table, kind in ((cli.LISTS, "list"), (cli.VALUES, "value")):
        for name, key in table.items():
            assert options[name][:2] == (key, kind), name
    format_option = next(p for p in command.params if p.name == "output_format")
    assert format_option.envvar == cli.OUTPUT_FORMAT_VARIABLE


def test_a_plain_check_prints_and_exits_as_the_app_does(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    (tmp_path / "b.py").write_text("import torch\n\nprint(\n")
    for args in (["a.py"], ["a.py", "b.py", "--statistics"], ["--select", "XLA9", "a.py"], ["--output-format", "json"]):
        command = [sys.executable, "-m", "xlalint.cli", "check", "--no-cache", *args]
        quick = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        # The same command line through the app: `-` after `--` is a path to the app and
        # makes the quick parse step aside; here a run that names only files.
        code = "import sys\nfrom xlalint.cli_app import app\nsys.argv[0] = 'xlalint'\napp()\n"
        through_app = subprocess.run(
            [sys.executable, "-c", code, "check", "--no-cache", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (quick.returncode, quick.stdout, quick.stderr) == (
            through_app.returncode,
            through_app.stdout,
            through_app.stderr,
        ), args
