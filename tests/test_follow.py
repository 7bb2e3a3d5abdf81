"""`check`/`fix` follow the program (xlalint/engine/follow.py): the local modules a
checked script imports are checked (and fixed) too, under their own paths."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from xlalint.analysis import project
from xlalint.engine import follow
from xlalint.engine.config import Settings

# minGPT's layout: the loop lives in the package, the script in projects/chargpt.
TRAINER = """\
import torch
from mingpt.utils import log


class Trainer:
    def run(self, model, loader, optimizer):
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            print(loss.item())
"""
TRAINER_FIXED = """\
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from mingpt.utils import log


class Trainer:
    def run(self, model, loader, optimizer):
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            xm.add_step_closure(lambda loss=loss: print(loss.item()))
            torch_xla.sync()
"""
SCRIPT = """\
import torch
import torch_xla
from mingpt.trainer import Trainer

Trainer().run(None, [], None)
"""
# Findings in mingpt/trainer.py: the loop has no sync point, `.item()` in the step.
TRAINER_FINDINGS = [("mingpt/trainer.py", 7, 9, "XLA103"), ("mingpt/trainer.py", 11, 19, "XLA102")]


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def mingpt(tmp_path) -> Path:
    write(
        tmp_path,
        {
            "pyproject.toml": "",
            "mingpt/__init__.py": "",
            "mingpt/trainer.py": TRAINER,
            "mingpt/utils.py": "def log(value):\n    print(value)\n",
            "projects/chargpt/chargpt.py": SCRIPT,
        },
    )
    return tmp_path


def found(result) -> list[tuple[str, int, int, str]]:
    return [
        (f["filename"], f["location"]["row"], f["location"]["column"], f["code"])
        for f in json.loads(result.stdout.decode())
    ]


def relative(rows, root: Path):
    return [(os.path.relpath(name, root), *rest) for name, *rest in rows]


def test_check_reports_the_findings_of_an_imported_local_module(mingpt, cli):
    result = cli("check", "projects/chargpt/chargpt.py", "--output-format", "json", cwd=mingpt)
    assert result.returncode == 1, result.stderr
    # Under its own path (JSON names files by their absolute path, as ruff does).
    assert relative(found(result), mingpt) == TRAINER_FINDINGS
    concise = cli("check", "projects/chargpt/chargpt.py", "--output-format", "concise", cwd=mingpt)
    lines = concise.stdout.decode().splitlines()
    # As a walk shows a file: relative to the current folder.
    assert lines[0].startswith("mingpt/trainer.py:7:9: XLA103")
    # __init__.py, trainer.py and utils.py (imported by trainer.py) are checked.
    assert lines[-1] == "3 imported local modules checked too"
    # Only the text formats say it; json prints findings only.
    assert (
        "checked too"
        not in cli("check", "projects/chargpt/chargpt.py", "--output-format", "json", cwd=mingpt).stdout.decode()
    )


def test_from_another_folder_the_paths_are_absolute(mingpt, cli):
    result = cli("check", "chargpt.py", "--output-format", "concise", cwd=mingpt / "projects" / "chargpt")
    assert result.stdout.decode().startswith(f"{mingpt / 'mingpt' / 'trainer.py'}:7:9: XLA103")


def test_no_follow_imports_checks_the_files_named_only(mingpt, cli):
    result = cli(
        "check", "projects/chargpt/chargpt.py", "--no-follow-imports", "--output-format", "concise", cwd=mingpt
    )
    assert result.returncode == 0, result.stdout
    assert result.stdout.decode() == "All checks passed!\n"
    # The config key says the same; the command line overrides it.
    write(mingpt, {"pyproject.toml": "[tool.xlalint]\nfollow-imports = false\n"})
    assert cli("check", "projects/chargpt/chargpt.py", cwd=mingpt).returncode == 0
    result = cli("check", "projects/chargpt/chargpt.py", "--follow-imports", "--output-format", "json", cwd=mingpt)
    assert relative(found(result), mingpt) == TRAINER_FINDINGS


def test_a_wrong_follow_imports_value_is_a_config_error(mingpt, cli):
    write(mingpt, {"pyproject.toml": '[tool.xlalint]\nfollow-imports = "yes"\n'})
    result = cli("check", "projects/chargpt/chargpt.py", cwd=mingpt)
    assert result.returncode == 2
    assert "`follow-imports` must be true or false" in result.stderr.decode()


def test_fix_fixes_the_script_and_its_imported_module(mingpt, cli):
    result = cli("fix", "projects/chargpt/chargpt.py", cwd=mingpt)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert (mingpt / "mingpt" / "trainer.py").read_text() == TRAINER_FIXED
    assert (mingpt / "projects" / "chargpt" / "chargpt.py").read_text() == SCRIPT
    # A second fix changes nothing.
    again = cli("fix", "projects/chargpt/chargpt.py", "--output-format", "concise", cwd=mingpt)
    assert (mingpt / "mingpt" / "trainer.py").read_text() == TRAINER_FIXED
    assert again.stdout.decode().startswith("All checks passed!")


def test_fix_diff_shows_the_module_and_writes_nothing(mingpt, cli):
    result = cli("fix", "--diff", "projects/chargpt/chargpt.py", cwd=mingpt)
    assert result.returncode == 1
    assert "mingpt/trainer.py" in result.stdout.decode()
    assert (mingpt / "mingpt" / "trainer.py").read_text() == TRAINER


def test_a_module_linked_from_outside_the_project_is_checked_not_written(tmp_path, cli):
    project_dir, outside = tmp_path / "proj", tmp_path / "elsewhere"
    write(project_dir, {"pyproject.toml": "", "chargpt.py": SCRIPT.replace("mingpt.trainer", "trainer")})
    write(outside, {"trainer.py": TRAINER.replace("from mingpt.utils import log", "log = print")})
    (project_dir / "trainer.py").symlink_to(outside / "trainer.py")
    result = cli("fix", "chargpt.py", "--output-format", "concise", cwd=project_dir)
    assert result.returncode == 1
    assert (outside / "trainer.py").read_text() == TRAINER.replace("from mingpt.utils import log", "log = print")
    assert "trainer.py:7:9: XLA103" in result.stdout.decode()
    assert "warning: trainer.py: checked, not fixed: a link to a file outside the project" in result.stderr.decode()


def test_excluded_and_gitignored_modules_are_not_added(mingpt, cli):
    write(mingpt, {"pyproject.toml": '[tool.xlalint]\nexclude = ["mingpt/trainer.py"]\n'})
    result = cli("check", "projects/chargpt/chargpt.py", "--output-format", "concise", cwd=mingpt)
    assert result.returncode == 0
    # utils.py is imported by trainer.py only: not followed through an excluded module.
    assert result.stdout.decode().splitlines()[-1] == "1 imported local module checked too"
    write(mingpt, {"pyproject.toml": '[tool.xlalint]\nexclude = ["mingpt"]\n'})  # a folder above
    result = cli("check", "projects/chargpt/chargpt.py", "--output-format", "concise", cwd=mingpt)
    assert result.stdout.decode() == "All checks passed!\n"
    write(mingpt, {"pyproject.toml": "", ".gitignore": "mingpt/\n"})
    (mingpt / ".git").mkdir()
    result = cli("check", "projects/chargpt/chargpt.py", "--output-format", "concise", cwd=mingpt)
    assert result.stdout.decode() == "All checks passed!\n"


def test_per_file_ignores_apply_by_the_module_path(mingpt, cli):
    write(mingpt, {"pyproject.toml": '[tool.xlalint]\nper-file-ignores = {"mingpt/*" = ["XLA102"]}\n'})
    result = cli("check", "projects/chargpt/chargpt.py", "--output-format", "json", cwd=mingpt)
    assert relative(found(result), mingpt) == TRAINER_FINDINGS[:1]


def test_a_module_already_in_the_run_is_checked_once(mingpt, cli):
    result = cli("check", "projects/chargpt/chargpt.py", "mingpt", "--output-format", "concise", cwd=mingpt)
    lines = result.stdout.decode().splitlines()
    assert [line for line in lines if "XLA" in line] == [
        "mingpt/trainer.py:7:9: XLA103 [*] " + lines[0].split(" [*] ", 1)[1],
        "mingpt/trainer.py:11:19: XLA102 [*] " + lines[1].split(" [*] ", 1)[1],
    ]
    assert not any("checked too" in line for line in lines)


def test_the_cache_answers_a_warm_run_the_same(mingpt, cli):
    args = ("check", "projects/chargpt/chargpt.py", "--output-format", "json")
    cold = cli(*args, cwd=mingpt)
    entries = [p for p in (mingpt / ".xlalint_cache").glob("??/*") if not p.name.startswith(".")]
    assert len(entries) == 4  # the script and the three modules: none read another module
    warm = cli(*args, cwd=mingpt)
    assert relative(found(warm), mingpt) == relative(found(cold), mingpt) == TRAINER_FINDINGS
    # A module edited between runs is checked again.
    write(mingpt, {"mingpt/trainer.py": TRAINER.replace("            print(loss.item())\n", "")})
    assert relative(found(cli(*args, cwd=mingpt)), mingpt) == TRAINER_FINDINGS[:1]


def test_a_warm_run_reads_only_the_files_with_findings(mingpt, monkeypatch):
    # What each file imports is kept in its entry: a warm run resolves it again
    # (stats), reads no clean file, and still checks the modules.
    from typer.testing import CliRunner

    from xlalint.cli import app
    from xlalint.engine import source as sourcefile

    an_hour_ago = time.time() - 3600
    for path in mingpt.rglob("*.py"):
        os.utime(path, (an_hour_ago, an_hour_ago))
    monkeypatch.chdir(mingpt)
    args = ["check", "projects/chargpt/chargpt.py", "--output-format", "concise"]
    cold = CliRunner().invoke(app, args, catch_exceptions=False)
    read = []
    real_read = sourcefile.read_file
    monkeypatch.setattr(sourcefile, "read_file", lambda path: read.append(Path(path).name) or real_read(path))
    warm = CliRunner().invoke(app, args, catch_exceptions=False)
    assert warm.stdout == cold.stdout
    assert "3 imported local modules checked too" in warm.stdout
    assert read == ["trainer.py"]  # its findings are held to its lines


def test_depth_is_bounded(tmp_path, cli):
    # m1 imports m2 imports ... m5: three imports away at most.
    chain = {f"m{i}.py": f"import m{i + 1}\n" for i in range(1, 5)}
    chain["m5.py"] = TRAINER.replace("from mingpt.utils import log", "log = print")
    write(tmp_path, {"pyproject.toml": "", "train.py": "import torch_xla\nimport m1\n", **chain})
    result = cli("check", "train.py", "--output-format", "concise", cwd=tmp_path)
    assert result.stdout.decode().splitlines()[-1] == "3 imported local modules checked too"
    assert result.returncode == 0
    write(tmp_path, {"train.py": "import torch_xla\nimport m3\n"})
    result = cli("check", "train.py", "--output-format", "concise", cwd=tmp_path)
    assert "m5.py:7:9: XLA103" in result.stdout.decode()


def test_the_number_of_added_modules_is_capped(tmp_path, monkeypatch):
    from xlalint.engine.runner import Job, process_all

    count = 6
    write(tmp_path, {"pyproject.toml": "", **{f"m{i}.py": "" for i in range(count)}})
    write(tmp_path, {"train.py": "".join(f"import m{i}\n" for i in range(count))})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(follow, "MAX_ADDED", 4)
    jobs = [Job("train.py", Settings(), follow=True)]
    followed = follow.follow_imports(jobs, process_all(jobs), lambda path: Settings())
    assert [r.path for r in followed.reports] == ["m0.py", "m1.py", "m2.py", "m3.py"]
    assert followed.capped and "stopped at 4" in follow.cap_warning(followed)


def test_local_imports_resolves_as_python_does(tmp_path):
    write(
        tmp_path,
        {
            "pyproject.toml": "",
            "pkg/__init__.py": "",
            "pkg/model.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/layers.py": "",
            "helpers.py": "",
            "torch/__init__.py": "",  # a library: never local
        },
    )
    code = textwrap.dedent(
        """
        import torch, os
        from pkg import model, missing_name
        import pkg.sub.layers as layers
        def later():
            import helpers
        """
    )
    found_paths = project.local_imports(code, str(tmp_path / "train.py"), None, None)
    assert [p.relative_to(tmp_path).as_posix() for p in found_paths] == [
        "pkg/__init__.py",
        "pkg/model.py",
        "pkg/sub/__init__.py",
        "pkg/sub/layers.py",
        "helpers.py",
    ]
    # Relative imports from a module of the package, on the script's search path.
    relative = project.local_imports(
        "from .sub import layers\nfrom . import model\n", str(tmp_path / "pkg" / "x.py"), str(tmp_path / "t.py"), None
    )
    # (The package itself first: Python ran it before its module.)
    assert [p.relative_to(tmp_path).as_posix() for p in relative] == [
        "pkg/__init__.py",
        "pkg/sub/__init__.py",
        "pkg/sub/layers.py",
        "pkg/model.py",
    ]


@pytest.mark.parametrize(
    ("code", "reads"),
    [
        ("import torch\nimport os.path\nfrom torch_xla.core import xla_model\n", False),
        ("import torch\nfrom model import GPT\n", True),
        ("from . import model\n", True),
        ("import os, \\\n    model\n", True),  # a continuation: it cannot tell
        ("import torch.nn as nn, numpy as np\ntry: import model\nexcept ImportError: pass\n", True),
        ("import os; import model\n", True),
        ("from.model import GPT\n", True),
        ('"""\nfrom the paper\n"""\n', True),  # a docstring line: parsed, nothing found
    ],
)
def test_a_module_that_imports_only_libraries_is_not_parsed(tmp_path, monkeypatch, code, reads):
    parsed = []
    real_parse = project.ast.parse
    monkeypatch.setattr(project.ast, "parse", lambda *a, **k: parsed.append(a) or real_parse(*a, **k))
    project.local_imports(code, str(tmp_path / "t.py"), None, None)
    assert bool(parsed) == reads


def test_stdin_and_add_noqa_do_not_follow(mingpt, cli):
    result = cli("check", "--stdin-filename", "projects/chargpt/chargpt.py", cwd=mingpt, stdin=SCRIPT)
    assert result.returncode == 0, result.stdout
    cli("check", "--add-noqa", "projects/chargpt/chargpt.py", cwd=mingpt)
    assert (mingpt / "mingpt" / "trainer.py").read_text() == TRAINER


ROOT = Path(__file__).resolve().parents[1]


def test_the_pre_commit_hooks_do_not_follow_imports(mingpt, cli):
    # pre-commit names the changed files: the hooks check (and fix) those only.
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    entries = [line.split(":", 1)[1].split() for line in hooks.splitlines() if line.strip().startswith("entry:")]
    assert len(entries) == 2 and all("--no-follow-imports" in entry for entry in entries)
    check_entry, fix_entry = entries
    result = cli(*check_entry[1:], "--", "projects/chargpt/chargpt.py", cwd=mingpt)
    assert result.returncode == 0, result.stdout
    cli(*fix_entry[1:], "--", "projects/chargpt/chargpt.py", cwd=mingpt)
    assert (mingpt / "mingpt" / "trainer.py").read_text() == TRAINER


def test_docs_output_quotes_the_lines_as_printed():
    doc = " ".join((ROOT / "docs" / "output.md").read_text().split())
    assert f"\n{follow.checked_too(3)}\n" in (ROOT / "docs" / "output.md").read_text()
    capped = follow.Followed([], capped=True)
    assert follow.cap_warning(capped) in doc  # it names the cap: 200, as the README says
    assert "at most 200 are added" in " ".join((ROOT / "README.md").read_text().split())


def test_the_check_s_parse_serves_to_find_the_imports(mingpt, monkeypatch):
    # The worker reuses the tree the check parsed: following costs no second parse.
    import ast

    from xlalint.engine import source as sourcefile
    from xlalint.engine.runner import Job, process_text

    script = mingpt / "projects" / "chargpt" / "chargpt.py"
    original = sourcefile.read(script)
    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parsed.append(a) or real_parse(*a, **k))
    report = process_text(Job(str(script), Settings(), follow=True), original)
    assert [Path(p).relative_to(mingpt).as_posix() for p in report.imports] == [
        "mingpt/__init__.py",
        "mingpt/trainer.py",
    ]
    assert len(parsed) == 1
