"""What the README's first screen and its notes claim, checked: the test command is CI's,
the first command exits 1 when it shows fixes, `target-version` before 2.4 writes
`xm.xla_device()`, and the size it gives for torch's `distributed_test.py`."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from support import run_cli

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_BLOCK = re.search(r"```bash\n(.*?)```", README, re.S).group(1)


def test_the_readme_test_command_is_what_ci_runs():
    commands = [line for line in FIRST_BLOCK.splitlines() if line.startswith("pip install -e '.[harness")]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("pip install")]
    assert len(commands) == 1 and ci == commands
    assert commands[0].endswith("&& pytest -n auto")
    # ... and the slow tests the default run leaves out, as a second command.
    assert "pytest -n auto -m slow" in (ROOT / ".ci" / "run").read_text().splitlines()
    assert "`pytest -n auto -m slow` runs those" in FIRST_BLOCK
    assert "about 3 GB of downloads" in FIRST_BLOCK and "exits 1 when it shows fixes" in FIRST_BLOCK


def test_the_first_command_exits_1_when_it_shows_fixes(tmp_path):
    result = run_cli("fix", "--unsafe-fixes", "--diff", str(ROOT / "examples" / "cuda_port.py"), cwd=tmp_path)
    assert result.returncode == 1 and result.stdout.startswith(b"--- ")


@pytest.mark.parametrize(("target", "device"), [((2, 3), "xm.xla_device()"), ((2, 4), "torch_xla.device()")])
def test_fixes_write_xm_xla_device_only_before_2_4(target, device):
    source = "import torch\nx = torch.ones(2).cuda()\n"
    fixed = fix_source(source, "t.py", settings=Settings(target_version=target)).source
    assert f".to({device})" in fixed
    assert "target-version` to a release before 2.4" in " ".join(README.split())


def test_distributed_test_size_in_the_readme():
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "testing/_internal/distributed/distributed_test.py"
    lines = len(path.read_text(encoding="utf-8").splitlines())
    claimed = float(re.search(r"`distributed_test.py` \(([\d.]+)k lines in torch", README).group(1))
    assert round(lines / 1000, 1) == claimed


def test_the_run_timeout_the_readme_gives_is_the_default():
    from xlalint.harness.command import DEFAULT_TIMEOUT_S

    text = " ".join(README.split())
    assert f"[--timeout S (default {DEFAULT_TIMEOUT_S:g}; 0: none)]" in text
    assert f"seconds, {DEFAULT_TIMEOUT_S:g} by default (`--timeout 0`: none)" in text


def test_the_readme_names_an_inserted_line_as_the_report_does():
    from xlalint.harness.report import format_causes
    from xlalint.harness.results import Cause

    cause = Cause("execution", "user torch_xla.sync", "train.py", None, None, "torch_xla.sync()", True, 45, 43)
    site = format_causes([cause])[1].split(" [")[0].strip()
    assert f"(`{site}`" in " ".join(README.split())


def test_the_readme_run_example_is_in_the_reports_order():
    """The verdict first, then the header, the comparison with directions, the diff."""
    example = re.search(r"dynamic_padding.py`,\n.*?\n\n```\n(.*?)```", README, re.S).group(1)
    lines = example.splitlines()
    assert re.fullmatch(
        r"fixed script: 14 -> 1 compiles, [\d.]+ -> [\d.]+ ms/step, same final loss \(0\.4999\)", lines[0]
    )
    assert lines[1] == "xlalint run examples/dynamic_padding.py: CPU, torch_xla 2.9.0"
    assert (
        example.index("14.00x fewer, better") < example.index("what the fix changed") < example.index("original run:")
    )


def test_the_configuration_example_names_every_key_and_is_valid():
    """The README's `[tool.xlalint]` example: every key the config accepts is shown, and
    the example itself loads (so it names only keys and codes that exist)."""
    import tomllib

    from xlalint.engine.config import KNOWN_KEYS, settings_from_table
    from xlalint.rules import rules_by_code

    block = re.search(r"```toml\n(\[tool\.xlalint\].*?)```", README, re.S).group(1)
    table = tomllib.loads(block)["tool"]["xlalint"]
    assert set(table) == KNOWN_KEYS
    settings_from_table(table, "README.md", None, rules_by_code())


@pytest.mark.parametrize(
    "option",
    [
        "--show-files", "--extend-exclude", "--exit-non-zero-on-fix", "--no-unsafe-fixes", "--exclude",
        "--output-file", "--isolated", "--watch",
    ],
)  # fmt: skip
def test_the_fix_controls_on_the_command_line_are_documented(option):
    assert f"`{option}" in README or f"{option}`" in README


def test_the_colour_the_readme_promises_a_pipe(tmp_path):
    """Piped, `concise` unless `--output-format full`; `FORCE_COLOR=1` colours either,
    as ruff's, as the README's command shows, and says why piped is not ruff's `full`."""
    from support import CUDA_SCRIPT

    text = " ".join(README.split())
    assert "`FORCE_COLOR=1 xlalint check --output-format full . | less -R`" in text
    assert "Ruff prints `full` piped too; xlalint keeps `concise` there on purpose" in text
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    forced = {"FORCE_COLOR": "1", "NO_COLOR": ""}
    full = run_cli("check", "--no-cache", "--output-format", "full", ".", cwd=tmp_path, env=forced)
    assert b"\x1b[" in full.stdout
    piped = run_cli("check", "--no-cache", ".", cwd=tmp_path, env={"FORCE_COLOR": "", "NO_COLOR": ""})
    assert b"\x1b[" not in piped.stdout and piped.stdout.startswith(b"train.py:3:9: XLA104 [*] ")
    forced_concise = run_cli("check", "--no-cache", ".", cwd=tmp_path, env=forced)
    assert forced_concise.stdout.startswith(b"\x1b[1mtrain.py\x1b[0m")


def test_the_ruff_table_names_options_that_exist():
    """Every xlalint option in the "Coming from ruff" table is one `check`, `fix` or
    `rule` takes (or a command that exists)."""
    table = README.split("### Coming from ruff", 1)[1].split("\n### ", 1)[0]
    rows = [line.split(" | ")[1] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    helps = " ".join(run_cli(*cmd, "--help").stdout.decode() for cmd in (["check"], ["fix"], ["rule"], []))
    options = {o for row in rows[1:] for o in re.findall(r"(?<![\w-])(--[a-z][a-z-]+|-[a-zA-Z])\b", row)}
    assert options and {o for o in options if o not in helps} == set()
    commands = {c for row in rows[1:] for c in re.findall(r"`xlalint ([a-z]+)", row)}
    assert commands >= {"version", "clean", "server", "rule"}
    assert all(run_cli(c, "--help").returncode == 0 for c in commands)


def test_show_settings_says_where_the_cache_goes_without_a_config(tmp_path):
    """No config file: the cache is at the git repository's root, and --show-settings says so."""
    (tmp_path / ".git").mkdir()
    work = tmp_path / "src"
    work.mkdir()
    (work / "a.py").write_text("import torch\n")
    shown = run_cli("check", "--show-settings", "a.py", cwd=work).stdout.decode().splitlines()
    assert "project root: none (no config file)" in shown
    assert f"cache: {tmp_path / '.xlalint_cache'}" in shown
    run_cli("check", "a.py", cwd=work)
    assert (tmp_path / ".xlalint_cache").is_dir() and not (work / ".xlalint_cache").exists()
    assert "`--show-settings` prints it as `cache:`" in " ".join(README.split())


def test_every_extra_is_named_and_installed_as_this_project_installs():
    """xlalint is not on PyPI: no `pip install 'xlalint[extra]'`; every extra is listed."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    listed = re.search(r"^Extras: (.*?)\n\n", README, re.S | re.M).group(1)
    assert all(f"`{extra}`" in listed for extra in extras)
    assert not re.search(r"pip install '?\"?xlalint\[[^\]]*\]'?\"?(?! @)", README)
    assert "pip install -e '.[harness-cuda]'" in README


def test_the_xla104_example_is_what_the_fixer_writes():
    """`xlalint rule XLA104` (and docs/rules.md) show the fix as `fix --unsafe-fixes` writes it."""
    from xlalint.rules import rules_by_code

    explanation = rules_by_code()["XLA104"].explanation
    before, after = re.findall(r"```python\n(.*?)```", explanation[explanation.index("## Example") :], re.S)[:2]
    assert fix_source(before, "train.py", Settings(), unsafe=True).source == after


def test_the_editor_test_extra_runs_the_editor_tests_on_its_own():
    """Issue 41: `pip install -e '.[editor-test]'` had no pytest, and with pytest alone
    addopts' `--dist worksteal` failed (pytest-xdist was only in `test`). The extra has
    what the editor tests import and what addopts needs; CONTRIBUTING gives the command."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = project["project"]["optional-dependencies"]["editor-test"]
    names = {re.split(r"[<>=\[ ]", requirement)[0] for requirement in extra}
    assert {"pytest", "pytest-xdist", "selenium", "nbformat"} <= names
    assert "--dist" in project["tool"]["pytest"]["ini_options"]["addopts"]  # why pytest-xdist
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for needed in (
        "pip install -e '.[editor-test]'",
        "--run-editor",
        "chromium chromium-driver",
        "editors/vscode/install-code-server.sh",
        "XLALINT_CODE_SERVER=",
    ):
        assert needed in contributing, needed


def test_the_readme_says_how_code_server_users_install_the_extension():
    text = " ".join(README.split())
    assert "`code-server --install-extension editors/vscode/xlalint.vsix`" in text
    vscode = " ".join((ROOT / "editors" / "vscode" / "README.md").read_text(encoding="utf-8").split())
    assert "code-server --install-extension editors/vscode/xlalint.vsix" in vscode
    assert "node DEST/package/out/node/entry.js --install-extension" in vscode
    assert ". .venv/bin/activate && code-server" in vscode  # daily use, from the environment
