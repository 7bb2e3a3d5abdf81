"""`xlalint clean` (as `ruff clean`) and `xlalint check --show-settings FILE`."""

from __future__ import annotations

import os

from support import CUDA_SCRIPT, run_cli

CACHE = ".xlalint_cache"


def test_clean_removes_the_cache_here_below_and_at_the_project_root(tmp_path):
    outer = tmp_path / "outer"
    project = outer / "project"
    (project / "src" / "deep").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.xlalint]\n")
    (project / "src" / "train.py").write_text(CUDA_SCRIPT)
    checked = run_cli("check", "train.py", cwd=project / "src")
    assert checked.returncode == 1
    made = [p for p in (project / CACHE, project / "src" / CACHE) if p.is_dir()]
    assert made, "check wrote no cache"
    for folder in (project / CACHE, project / "src" / "deep" / CACHE, outer / CACHE):
        folder.mkdir(exist_ok=True)
        (folder / "entry").write_text("{}")
    result = run_cli("clean", cwd=project / "src")
    assert result.returncode == 0, result.stderr
    assert not (project / CACHE).exists() and not (project / "src" / CACHE).exists()
    assert not (project / "src" / "deep" / CACHE).exists()
    assert (outer / CACHE / "entry").exists()  # not this project's
    removed = [line for line in result.stdout.decode().splitlines() if line.startswith("Removing cache at: ")]
    assert len(removed) == 2 + (project / "src" / CACHE in made)
    again = run_cli("clean", cwd=project / "src")
    assert again.returncode == 0 and again.stdout == b""


def test_clean_removes_a_link_not_its_target(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious").write_text("x")
    os.symlink(target, tmp_path / CACHE)
    result = run_cli("clean", cwd=tmp_path)
    assert result.returncode == 0
    assert not os.path.lexists(tmp_path / CACHE)
    assert (target / "precious").read_text() == "x"


PYPROJECT = """\
[tool.xlalint]
ignore = ["XLA3"]
target-version = "2.6"
exclude = ["generated"]

[tool.xlalint.per-file-ignores]
"legacy_*.py" = ["XLA104"]

[tool.xlalint.rules.XLA101]
max-length = 128
"""


def test_show_settings_prints_what_applies_to_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "legacy_train.py").write_text(CUDA_SCRIPT)
    result = run_cli("check", "--show-settings", "--extend-select", "XLA301", "legacy_train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert f"config file: {tmp_path / 'pyproject.toml'}\n" in text
    assert 'target-version = "2.6"\n' in text
    assert 'ignore = ["XLA3"]\n' in text and "command line: --extend-select XLA301\n" in text
    assert '  "legacy_*.py" = ["XLA104"]\n' in text
    assert "  XLA101 dynamic-padding (max-length = 128)\n" in text
    assert "  XLA301 partial-last-batch\n" in text and "XLA302" not in text.split("enabled rules")[1]
    assert text.rstrip().endswith("turned off for this file by per-file-ignores: XLA104")
    other = run_cli("check", "--show-settings", "other.py", cwd=tmp_path).stdout.decode()
    assert "  XLA104 cuda-device\n" in other and "turned off" not in other


def test_show_settings_without_a_config_and_its_errors(tmp_path):
    (tmp_path / "a.py").write_text(CUDA_SCRIPT)
    text = run_cli("check", "--show-settings", "a.py", cwd=tmp_path).stdout.decode()
    assert "config file: none (defaults)\n" in text and 'target-version = "2.9"\n' in text
    # No path is the folder, as ruff's (tests/test_ruff_controls.py).
    for args in (("a.py", "b.py"), ("-",)):
        result = run_cli("check", "--show-settings", *args, cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.decode() == "xlalint: error: --show-settings takes one file or folder\n"
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\ntarget-version = "9.9"\n')
    bad = run_cli("check", "--show-settings", "a.py", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.decode().splitlines()) == 1
