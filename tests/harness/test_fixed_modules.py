"""Fixed copies of the script's local modules: prepared in a temp tree with the user's
layout, and run in place of the user's files under their names.

No torch here: the child is plain Python through the harness's runner and bootstrap
(the fixed copies are written by hand), so it runs in about a second.
"""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

import pytest

from xlalint.harness import prepare, runner
from xlalint.harness.debug_log import Frame, RawCause
from xlalint.harness.environment import Device
from xlalint.harness.report import version_fix_summary
from xlalint.harness.session import RunOptions, UsageError, _prepare_versions, _read_local_modules, run_harness


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


PROJECT = {
    "main.py": """\
        import torch
        from loop import train

        device = torch.device("cuda")
        train(device)
    """,
    "loop.py": """\
        import torch
        import pkg.util


        def train(device):
            model = torch.nn.Linear(2, 1).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                loss = model(torch.ones(1, 2).to(device)).sum()
                loss.backward()
                opt.step()
    """,
    "pkg/__init__.py": "",
    "pkg/util.py": "X = 1\n",
}


def prepared_project(tmp_path: Path, **options):
    user = tmp_path / "user"
    write_tree(user, PROJECT)
    script = user / "main.py"
    display = "user/main.py"
    script_file = prepare.read_user_file(script, display, Path("main.py"))
    modules = prepare.read_local_modules(script, display)
    return user, _prepare_versions(RunOptions(script=script, **options), script_file, modules, tmp_path / "work")


def test_the_fix_reaches_local_modules_and_keeps_their_layout(tmp_path):
    user, prepared = prepared_project(tmp_path, compare=True)
    assert [m.display_path for m in prepared.original.modules] == [
        "user/loop.py",
        "user/pkg/__init__.py",
        "user/pkg/util.py",
    ]
    reference_run, baseline, fixed = prepared.versions
    assert reference_run.label == "reference" and reference_run.native  # the original, no XLA
    assert baseline.description == "port (the original with XLA104's safe fixes)"  # the CUDA calls are in loop.py
    for version, folder in ((baseline, "port"), (fixed, "fixed")):
        changed = {f.display_path: f.run_path for f in version.files() if f.changed}
        assert changed == {
            "user/main.py": tmp_path / "work" / folder / "main.py",
            "user/loop.py": tmp_path / "work" / folder / "loop.py",
        }
        assert set(version.fixed_files()) == {str((user / name).resolve()) for name in ("main.py", "loop.py")}
        # Unchanged modules run from the user's folder.
        assert version.modules[2].run_path == (user / "pkg" / "util.py").resolve()
    assert ".cuda()" not in fixed.modules[0].source and "torch_xla.sync()" in fixed.modules[0].source
    assert "torch_xla.sync()" not in baseline.modules[0].source
    assert (user / "loop.py").read_text() == textwrap.dedent(PROJECT["loop.py"])
    summary = version_fix_summary(fixed, hint_unsafe=False)
    assert summary.startswith("fixed: fixes applied: 3 (user/main.py: XLA104 x1; user/loop.py: XLA103 x1, XLA104 x1);")


def test_compare_runs_once_when_the_fix_changes_nothing(tmp_path):
    user = tmp_path / "user"
    write_tree(user, {"main.py": "import torch\nprint(torch.ones(2).sum())\n"})
    script_file = prepare.read_user_file(user / "main.py", "main.py", Path("main.py"))
    prepared = _prepare_versions(RunOptions(script=user / "main.py", compare=True), script_file, [], tmp_path)
    assert [v.label for v in prepared.versions] == ["reference", "fixed"]
    assert prepared.comparison_skipped == (
        "the fixed script is the port (the original: nothing to port) (the fix changed nothing more), so it ran once"
    )
    assert prepared.skipped_runs["port"].status == "skipped"


def test_a_cause_in_a_fixed_module_is_shown_at_the_users_file_and_line(tmp_path):
    _user, prepared = prepared_project(tmp_path)
    (fixed,) = prepared.versions
    loop = fixed.modules[0]
    lines = loop.source.splitlines()
    sync_line = lines.index("        torch_xla.sync()") + 1
    step_line = lines.index("        opt.step()") + 1
    settings = runner.RunSettings(sys.executable, Device("CPU", {}), tmp_path, Path("user/main.py"), "user/main.py", [])
    at_sync = runner._locate(
        RawCause("execution", "user torch_xla.sync", [Frame("train", str(loop.run_path), sync_line)]),
        fixed,
        settings.display_path,
    )
    assert (at_sync.file, at_sync.line, at_sync.fixed_line, at_sync.from_fix) == ("user/loop.py", None, sync_line, True)
    at_step = runner._locate(
        RawCause("execution", "x", [Frame("train", str(loop.run_path), step_line), Frame("<module>", "/x/main.py", 5)]),
        fixed,
        settings.display_path,
    )
    user_step_line = textwrap.dedent(PROJECT["loop.py"]).splitlines().index("        opt.step()") + 1
    assert (at_step.file, at_step.line, at_step.from_fix) == ("user/loop.py", user_step_line, False)


CHILD_PROJECT = {
    "main.py": """\
        import multiprocessing as mp
        import os

        import helper
        import pkg.sub

        HERE = os.path.dirname(os.path.abspath(__file__))


        def work(_):
            return "FIXED" in globals(), helper.WHO


        if __name__ == "__main__":
            print("main", "fixed" if "FIXED" in globals() else "original", __file__)
            print("data", open(os.path.join(HERE, "data.txt")).read().strip())
            print("helper", helper.WHO, helper.data())
            print("pkg", pkg.WHO, pkg.sub.WHO)
            with mp.get_context("spawn").Pool(1) as pool:
                print("worker", pool.map(work, [0]))
    """,
    "helper.py": """\
        import os
        WHO = "original helper"

        def data():
            return open(os.path.join(os.path.dirname(__file__), "data.txt")).read().strip()
    """,
    "pkg/__init__.py": "WHO = 'original pkg'\n",
    "pkg/sub.py": "WHO = 'original sub'\n",
    "data.txt": "next to the script\n",
}


def test_the_child_runs_fixed_copies_as_the_users_files(tmp_path):
    """The fixed main and modules run under the user's names and paths: __file__ is
    the user's (data files next to it are found), a package's submodules still come
    from the user's folder, spawned workers run the fixed main too, and nothing is
    cached in the user's __pycache__ from a fixed copy."""
    user = tmp_path / "user"
    write_tree(user, CHILD_PROJECT)
    copies = tmp_path / "fixed"
    fixed_sources = {
        "main.py": "FIXED = True\n" + textwrap.dedent(CHILD_PROJECT["main.py"]),
        "helper.py": textwrap.dedent(CHILD_PROJECT["helper.py"]).replace("original", "fixed"),
        "pkg/__init__.py": "WHO = 'fixed pkg'\n",
    }
    write_tree(copies, fixed_sources)

    def source_file(name: str, fixed: bool) -> prepare.SourceFile:
        user_source = textwrap.dedent(CHILD_PROJECT[name])
        if not fixed:
            return prepare.SourceFile(run_path=user / name, source=user_source, findings=[], user_path=user / name)
        source = fixed_sources[name]
        return prepare.SourceFile(
            run_path=copies / name,
            source=source,
            findings=[],
            line_map=prepare.LineMap(user_source, source),
            display_path=name,
            user_path=user / name,
        )

    script = source_file("main.py", fixed=True)
    version = prepare.ScriptVersion(
        **{
            name: getattr(script, name)
            for name in ("run_path", "source", "findings", "line_map", "user_path", "display_path")
        },
        label="fixed",
        modules=[
            source_file("helper.py", True),
            source_file("pkg/__init__.py", True),
            source_file("pkg/sub.py", False),
        ],
    )
    settings = runner.RunSettings(
        python=sys.executable,
        device=Device("CPU", {}),
        hook_dir=runner.write_hook(tmp_path / "hook"),
        user_script=user / "main.py",
        display_path="main.py",
        script_args=[],
        timeout_s=60,
    )
    result = runner.execute(version, settings, tmp_path / "out")
    assert result.ok, result.stderr_tail
    out = (tmp_path / "out" / "stdout.txt").read_text().splitlines()
    assert out == [
        f"main fixed {(user / 'main.py').resolve()}",
        "data next to the script",
        "helper fixed helper next to the script",
        "pkg fixed pkg original sub",
        "worker [(True, 'fixed helper')]",
    ]
    assert result.fixed_files == ["main.py", "helper.py", "pkg/__init__.py"]
    cached = {p.name.split(".")[0] for p in user.rglob("*.pyc")}
    assert "helper" not in cached and "__init__" not in cached


# minGPT's layout (issue 28): the script in projects/chargpt, the loop in the package
# at the project root, imported through an editable install.
MINGPT = {
    "pyproject.toml": "",
    "mingpt/__init__.py": "",
    "mingpt/trainer.py": """\
        import torch


        def train(model, opt):
            for step in range(3):
                loss = model(torch.ones(1, 2).cuda()).sum()
                loss.backward()
                opt.step()
    """,
    "projects/chargpt/chargpt.py": """\
        import torch
        import torch_xla
        from mingpt.trainer import train

        model = torch.nn.Linear(2, 1).to(torch_xla.device())
        train(model, torch.optim.SGD(model.parameters(), lr=0.1))
    """,
}


def prepared_mingpt(tmp_path: Path, files: dict[str, str] = MINGPT, **options):
    repo = tmp_path / "repo"
    write_tree(repo, files)
    script = repo / "projects" / "chargpt" / "chargpt.py"
    display = str(script)
    script_file = prepare.read_user_file(script, display, Path(script.name))
    run_options = RunOptions(script=script, **options)
    modules = _read_local_modules(run_options, display)
    return repo, _prepare_versions(run_options, script_file, modules, tmp_path / "work")


def test_the_modules_of_the_project_root_are_fixed_as_check_follows_them(tmp_path):
    """The module outside the script's folder is found as `check` finds it, fixed into
    the version's folder apart from the script's layout, and run in place of the user's
    (by its real path); the summary names the fixes per file."""
    repo, prepared = prepared_mingpt(tmp_path)
    trainer = repo / "mingpt" / "trainer.py"
    assert [m.display_path for m in prepared.original.modules] == [str(repo / "mingpt" / "__init__.py"), str(trainer)]
    (fixed,) = prepared.versions
    changed = {f.display_path: f.run_path for f in fixed.files() if f.changed}
    assert changed == {str(trainer): tmp_path / "work" / "fixed" / "_project" / "mingpt" / "trainer.py"}
    assert set(fixed.fixed_files()) == {str(trainer.resolve())}
    assert ".cuda()" not in fixed.modules[1].source and "torch_xla.sync()" in fixed.modules[1].source
    assert trainer.read_text() == textwrap.dedent(MINGPT["mingpt/trainer.py"])
    summary = version_fix_summary(fixed, hint_unsafe=False)
    assert summary.startswith(f"fixed: fixes applied: 2 ({trainer}: XLA103 x1, XLA104 x1); findings left: 0")


@pytest.mark.parametrize(
    ("config", "option", "followed"),
    [
        ("", False, False),
        ("[tool.xlalint]\nfollow-imports = false\n", None, False),
        ("[tool.xlalint]\nfollow-imports = false\n", True, True),
        ("", None, True),
    ],
)
def test_no_follow_imports_runs_the_users_modules_as_they_are(tmp_path, config, option, followed):
    """`--no-follow-imports` (or `follow-imports = false` in the config, unless
    `--follow-imports`) fixes the script alone: its modules run as they are."""
    _repo, prepared = prepared_mingpt(tmp_path, {**MINGPT, "pyproject.toml": config}, follow_imports=option)
    (fixed,) = prepared.versions
    assert bool(fixed.modules) == followed
    assert len(fixed.fixed_files()) == (1 if followed else 0)


def test_the_report_is_not_written_over_a_module_of_the_project_root(tmp_path):
    repo = tmp_path / "repo"
    write_tree(repo, MINGPT)
    trainer = repo / "mingpt" / "trainer.py"
    with pytest.raises(UsageError, match="is the script's local module"):
        run_harness(RunOptions(script=repo / "projects" / "chargpt" / "chargpt.py", json_path=trainer), io.StringIO())
    assert trainer.read_text() == textwrap.dedent(MINGPT["mingpt/trainer.py"])


def test_installed_code_is_never_a_module_to_fix(tmp_path):
    """A script run from site-packages: its neighbours (which `check` follows to) are
    installed code, run as they are."""
    installed = tmp_path / "lib" / "site-packages" / "tool"
    write_tree(installed, {**PROJECT, "pyproject.toml": ""})
    script = installed / "main.py"
    assert prepare.read_local_modules(script, str(script)) == []


def test_the_modules_of_an_xla_program_get_the_fixes_of_an_xla_program(tmp_path):
    # `xlalint run` fixes the model module the sampling script imports as `xlalint fix`
    # does: its generate() crop (XLA308) and growth are code that runs on XLA.
    program = Path(__file__).resolve().parents[1] / "fixtures" / "XLA308" / "program"
    user = tmp_path / "user"
    user.mkdir()
    for name in ("model.py", "sample_cuda.py"):
        (user / name).write_text((program / name).read_text())
    script = user / "sample_cuda.py"
    script_file = prepare.read_user_file(script, "user/sample_cuda.py", Path("sample_cuda.py"))
    modules = prepare.read_local_modules(script, "user/sample_cuda.py")
    options = RunOptions(script=script, unsafe_fixes=True)
    (fixed,) = _prepare_versions(options, script_file, modules, tmp_path / "work").versions
    assert "import torch_xla" in fixed.source
    (model,) = fixed.modules
    assert "idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]" in model.source


def test_a_module_whose_helper_s_loader_the_script_iterates_gets_its_fix(tmp_path):
    # Issue 38: `xlalint run` fixes data.py as `xlalint fix --unsafe-fixes train.py`
    # does: train.py's step loop iterates what `prepare_dataloader` returns (XLA301).
    program = Path(__file__).resolve().parents[1] / "fixtures" / "XLA301" / "helper_module"
    user = tmp_path / "user"
    user.mkdir()
    for name in ("data.py", "train.py"):
        (user / name).write_text((program / name).read_text())
    script = user / "train.py"
    script_file = prepare.read_user_file(script, "user/train.py", Path("train.py"))
    modules = prepare.read_local_modules(script, "user/train.py")
    options = RunOptions(script=script, unsafe_fixes=True)
    (fixed,) = _prepare_versions(options, script_file, modules, tmp_path / "work").versions
    (data,) = fixed.modules
    assert data.source == (program / "data.unsafe.py").read_text()
    assert [(f.code, line) for f, line in zip(data.applied, data.applied_lines, strict=True)] == [("XLA301", 14)]
