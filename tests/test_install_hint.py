"""Install hints that work: xlalint is not on PyPI, so the hint names the source tree or
URL this install came from, and the index form only when it knows neither."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import xlalint
from xlalint import install_hint
from xlalint.install_hint import install_command

TREE = Path(xlalint.__file__).resolve().parent.parent


class FakeDistribution:
    def __init__(self, direct_url: dict | None):
        self.direct_url = direct_url

    def read_text(self, name: str):
        assert name == "direct_url.json"
        return json.dumps(self.direct_url) if self.direct_url is not None else None


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """``installed(direct_url)``: xlalint as if imported from site-packages (no source
    tree around it), with this PEP 610 record (None: no distribution at all)."""
    site = tmp_path / "site-packages" / "xlalint"
    site.mkdir(parents=True)
    monkeypatch.setattr(xlalint, "__file__", str(site / "__init__.py"))

    def install(direct_url: dict | None, found: bool = True) -> None:
        def distribution(name):
            assert name == "xlalint"
            if not found:
                raise importlib.metadata.PackageNotFoundError(name)
            return FakeDistribution(direct_url)

        monkeypatch.setattr(importlib.metadata, "distribution", distribution)

    return install


def test_from_this_source_tree(monkeypatch, tmp_path):
    monkeypatch.chdir(TREE)
    assert install_command("harness") == "pip install -e '.[harness]'"
    monkeypatch.chdir(tmp_path)
    assert install_command("server") == f"pip install -e '{TREE}[server]'"


def test_from_a_git_url(installed):
    installed({"url": "https://example.org/org/xlalint.git", "vcs_info": {"vcs": "git", "commit_id": "0123abc"}})
    assert (
        install_command("harness") == "pip install 'xlalint[harness] @ git+https://example.org/org/xlalint.git@0123abc'"
    )


def test_from_a_folder_editable_or_not(installed, tmp_path):
    folder = tmp_path / "my clone"
    folder.mkdir()
    installed({"url": folder.as_uri(), "dir_info": {"editable": True}})
    assert install_command("server") == f"pip install -e '{folder}[server]'"
    installed({"url": folder.as_uri(), "dir_info": {}})
    assert install_command("server") == f"pip install '{folder}[server]'"


def test_from_an_archive_url(installed):
    installed({"url": "https://example.org/xlalint-0.1.0.tar.gz", "archive_info": {}})
    assert install_command("harness") == "pip install 'xlalint[harness] @ https://example.org/xlalint-0.1.0.tar.gz'"


@pytest.mark.parametrize("found", [True, False])
def test_the_index_form_when_nothing_else_is_known(installed, found):
    installed(None, found=found)
    assert install_command("harness") == "pip install 'xlalint[harness]'"


def test_a_source_tree_is_one_whose_pyproject_names_xlalint(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert install_hint._source_tree(tmp_path) is None
    assert install_hint._source_tree(TREE) == TREE


def test_server_without_pygls_gives_a_hint_that_works():
    """pygls hidden from the interpreter: `xlalint server` says how to install it here."""
    code = (
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name in ('pygls', 'lsprotocol') else real(name, *a)\n"
        "from xlalint.cli import main\nsys.argv = ['xlalint', 'server']\nmain()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=TREE, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "xlalint: error: the language server needs pygls and lsprotocol: pip install -e '.[server]'"
    )


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_the_docs_page_of_each_install(installed, tmp_path):
    """Where a JSON finding's `url` points: docs/rules.md in this source tree, in the
    folder installed from, on GitHub at the commit installed; nothing it cannot know."""
    from xlalint.install_hint import source_file_url

    folder = tmp_path / "clone"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "rules.md").write_text("# rules\n")
    installed({"url": folder.as_uri(), "dir_info": {}})
    assert source_file_url("docs/rules.md") == (folder / "docs" / "rules.md").as_uri()
    assert source_file_url("docs/missing.md") is None
    git = {"vcs": "git", "commit_id": COMMIT}
    installed({"url": "https://github.com/org/xlalint.git", "vcs_info": git})
    assert source_file_url("docs/rules.md") == f"https://github.com/org/xlalint/blob/{COMMIT}/docs/rules.md"
    installed({"url": "https://github.com/org/mono", "vcs_info": git, "subdirectory": "tools/xlalint"})
    assert source_file_url("docs/rules.md") == f"https://github.com/org/mono/blob/{COMMIT}/tools/xlalint/docs/rules.md"
    for direct in (
        {"url": "https://example.org/org/xlalint.git", "vcs_info": git},  # another host: not guessed
        {"url": "https://github.com/org/xlalint.git", "vcs_info": {"vcs": "git", "commit_id": "main"}},
        {"url": "https://example.org/xlalint-0.1.0.tar.gz", "archive_info": {}},
        None,
    ):
        installed(direct)
        assert source_file_url("docs/rules.md") is None


def test_the_docs_page_in_this_source_tree():
    from xlalint.install_hint import source_file_url

    assert source_file_url("docs/rules.md") == (TREE / "docs" / "rules.md").as_uri()
