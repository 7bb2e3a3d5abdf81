"""Finding the script's local modules: the imports that resolve to files in its folder."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from xlalint.harness.local_modules import find_local_modules, imported_module_names


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return root / "main.py"


def found(script: Path) -> dict[str, str]:
    """module name -> its file, relative to the script's folder"""
    root = script.parent
    return {module.name: module.path.relative_to(root).as_posix() for module in find_local_modules(script)}


def test_sibling_module_and_package_imports(tmp_path):
    script = write_tree(
        tmp_path,
        {
            "main.py": """\
                import os
                import train
                from mypkg.trainer import Trainer
                from mypkg import helpers, VERSION
            """,
            "train.py": "",
            "mypkg/__init__.py": "VERSION = 1\n",
            "mypkg/trainer.py": "",
            "mypkg/helpers.py": "",
        },
    )
    assert found(script) == {
        "train": "train.py",
        "mypkg": "mypkg/__init__.py",
        "mypkg.trainer": "mypkg/trainer.py",
        "mypkg.helpers": "mypkg/helpers.py",  # a submodule; VERSION is a name in mypkg
    }


def test_import_a_b_loads_each_package_on_the_way(tmp_path):
    script = write_tree(
        tmp_path,
        {"main.py": "import a.b.c\n", "a/__init__.py": "", "a/b/__init__.py": "", "a/b/c.py": "", "a/d.py": ""},
    )
    assert found(script) == {"a": "a/__init__.py", "a.b": "a/b/__init__.py", "a.b.c": "a/b/c.py"}


def test_relative_imports_resolve_against_the_importing_package(tmp_path):
    script = write_tree(
        tmp_path,
        {
            "main.py": "from pkg.sub import worker\n",
            "pkg/__init__.py": "from . import config\nfrom .util import helper\n",
            "pkg/config.py": "",
            "pkg/util.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/worker.py": "from .. import shared\nfrom ..util import helper\nfrom ... import too_far\n",
            "pkg/shared.py": "",
            "too_far.py": "",
        },
    )
    assert found(script) == {
        "pkg": "pkg/__init__.py",
        "pkg.sub": "pkg/sub/__init__.py",
        "pkg.sub.worker": "pkg/sub/worker.py",
        "pkg.config": "pkg/config.py",
        "pkg.util": "pkg/util.py",
        "pkg.shared": "pkg/shared.py",
        # `from ... import too_far` climbs out of `pkg`: an ImportError, not a local module.
    }


def test_a_relative_import_in_the_script_itself_is_not_followed(tmp_path):
    # Run as a script it has no package: Python raises ImportError there.
    script = write_tree(tmp_path, {"main.py": "from . import sibling\n", "sibling.py": ""})
    assert found(script) == {}


def test_names_not_found_locally_are_left_alone(tmp_path):
    script = write_tree(
        tmp_path,
        {"main.py": "import torch\nimport numpy as np\nfrom torch_xla.core import xla_model\nimport missing\n"},
    )
    assert found(script) == {}


def test_a_local_module_shadows_an_installed_one_as_in_python(tmp_path):
    # The script's folder is sys.path[0]: its `numpy.py` is what `import numpy` loads.
    script = write_tree(tmp_path, {"main.py": "import numpy\nimport libcst\n", "numpy.py": ""})
    assert found(script) == {"numpy": "numpy.py"}


def test_a_package_wins_over_a_module_of_the_same_name_and_a_module_over_a_folder(tmp_path):
    script = write_tree(
        tmp_path,
        {
            "main.py": "import both\nimport plain\n",
            "both/__init__.py": "",
            "both.py": "",
            "plain.py": "",
            "plain/notes.txt": "",
        },
    )
    assert found(script) == {"both": "both/__init__.py", "plain": "plain.py"}


def test_a_folder_without_init_is_a_namespace_package(tmp_path):
    # The `src/` layout: no __init__.py, its modules are still local.
    script = write_tree(
        tmp_path,
        {
            "main.py": "from src.model import Net\nimport src.data.loader\n",
            "src/model.py": "",
            "src/data/loader.py": "",
        },
    )
    assert found(script) == {"src.model": "src/model.py", "src.data.loader": "src/data/loader.py"}


def test_cycles_end_and_the_script_is_never_listed(tmp_path):
    script = write_tree(
        tmp_path,
        {
            "main.py": "import a\nARGS = 1\n",
            "a.py": "import b\n",
            "b.py": "import a\nfrom main import ARGS\n",
        },
    )
    assert found(script) == {"a": "a.py", "b": "b.py"}


def test_imports_anywhere_in_the_code_count(tmp_path):
    script = write_tree(
        tmp_path,
        {
            "main.py": """\
                try:
                    import fast
                except ImportError:
                    import slow

                def train():
                    from loop import run
                    return run()
            """,
            "fast.py": "",
            "slow.py": "",
            "loop.py": "",
        },
    )
    assert set(found(script)) == {"fast", "slow", "loop"}


def test_a_module_that_does_not_parse_is_listed_but_not_followed(tmp_path):
    script = write_tree(tmp_path, {"main.py": "import broken\n", "broken.py": "import other\ndef (:\n", "other.py": ""})
    assert found(script) == {"broken": "broken.py"}


def test_a_script_in_site_packages_has_no_local_modules(tmp_path):
    folder = tmp_path / "lib" / "python3.11" / "site-packages" / "tool"
    script = write_tree(folder, {"main.py": "import helper\n", "helper.py": ""})
    assert found(script) == {}


def test_imported_module_names_lists_parents_and_candidates():
    tree = ast.parse("import a.b\nfrom c.d import e\nfrom x import *\nfrom .f import g\nfrom .. import h\n")
    assert imported_module_names(tree, "pkg.sub") == [
        "a",
        "a.b",
        "c",
        "c.d",
        "c.d.e",
        "x",
        "pkg",
        "pkg.sub",
        "pkg.sub.f",
        "pkg.sub.f.g",
        "pkg.h",
    ]
