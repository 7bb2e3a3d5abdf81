"""The engine in-process: scope, aliases, suppressions, config, the fix loop, atomic writes."""

from __future__ import annotations

import textwrap

import pytest

from xlalint.analysis.semantic import ImportTable
from xlalint.engine import noqa
from xlalint.engine.config import ConfigError, ConfigFinder, Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.engine.source import SourceError, decode, write_atomic
from xlalint.model import Import
from xlalint.rules import rules_by_code


def codes(source: str, settings: Settings | None = None) -> list[tuple[int, str]]:
    return [(f.span.line, f.code) for f in lint_source(textwrap.dedent(source), "t.py", settings)]


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ntorch.cuda.synchronize()\n",
        "import torch as T\nT.cuda.synchronize()\n",
        "from torch import cuda\ncuda.synchronize()\n",
        "from torch.cuda import synchronize as sync\nsync()\n",
    ],
)
def test_aliases_resolve(source):
    assert codes(source) == [(2, "XLA104")]


def test_import_table_qualified_names():
    import ast

    from xlalint.analysis.semantic import Semantic

    tree = ast.parse(
        "import torch_xla.core.xla_model as xm\nfrom torch_xla.core import xla_model\nimport torch_xla.runtime\n"
    )
    semantic = Semantic(tree)
    call = ast.parse("xm.mark_step()").body[0].value
    assert semantic.call_name(call) == "torch_xla.core.xla_model.mark_step"
    call = ast.parse("xla_model.mark_step()").body[0].value
    assert semantic.call_name(call) == "torch_xla.core.xla_model.mark_step"
    call = ast.parse("torch_xla.runtime.world_size()").body[0].value
    assert semantic.call_name(call) == "torch_xla.runtime.world_size"
    assert semantic.imports.reference("torch_xla.core.xla_model", "xm") == ("xm", ())
    assert semantic.imports.reference("torch_xla") == ("torch_xla", ())


def test_reference_asks_for_import_and_avoids_taken_alias():
    import ast

    table = ImportTable.build(ast.parse("import torch\nxm = 3\n"))
    name, imports = table.reference("torch_xla.core.xla_model", "xm")
    assert name == "xm" and imports[0].asname == "xm"
    taken = ImportTable.build(ast.parse("import numpy as xm\n"))
    name, imports = taken.reference("torch_xla.core.xla_model", "xm")
    assert name == "xm_1" and imports == (Import("torch_xla.core.xla_model", asname="xm_1"),)


def test_reference_sees_the_names_bound_where_the_fix_goes():
    import ast

    from xlalint.analysis.semantic import Semantic, attach_parents

    source = textwrap.dedent("""
        import torch_xla
        from transformers import Trainer
        xm = 5
        def train(torch_xla, Trainer):
            return 1
        def setup():
            import torch_xla.core.xla_model as xm_1
            return 2
    """)
    tree = ast.parse(source)
    semantic = Semantic(tree, attach_parents(tree))
    in_train, in_setup = (n for n in semantic.nodes if isinstance(n, ast.Return))
    at = semantic.names_at
    # A module variable `xm`; a local import in another function binds `xm_1` only there.
    assert semantic.imports.reference("torch_xla.core.xla_model", "xm", at(in_train)) == (
        "xm_2",
        (Import("torch_xla.core.xla_model", asname="xm_2"),),
    )
    assert semantic.imports.reference("torch_xla.core.xla_model", "xm", at(in_setup)) == ("xm_1", ())
    # The parameter `torch_xla` hides the module's import inside train() only.
    assert semantic.imports.reference("torch_xla", None, at(in_train)) == (
        "torch_xla_1",
        (Import("torch_xla", asname="torch_xla_1"),),
    )
    assert semantic.imports.reference("torch_xla", None, at(in_setup)) == ("torch_xla", ())
    # Without a node, a name bound anywhere is taken.
    assert semantic.imports.reference("torch_xla", None, at(None))[0] == "torch_xla_1"
    assert semantic.imports.reference_object("transformers.Trainer", at(in_setup)) == ("Trainer", ())
    assert semantic.imports.reference_object("transformers.Trainer", at(in_train)) == (
        "transformers.Trainer",
        (Import("transformers"),),
    )


def test_out_of_scope_and_strings_and_comments():
    assert codes("x.cuda()\n") == []  # no torch import: not in scope
    assert codes('import torch\ns = "x.cuda()"  # y.cuda()\n') == []


@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("# noqa", True),
        ("# noqa: XLA104", True),
        ("# NOQA:XLA104", True),
        ("# noqa: E501, XLA104", True),
        ("# noqa: E501", False),
        ("# noqa: XLA101", False),
        ("# type: ignore  # noqa: XLA104", True),
    ],
)
def test_noqa(comment, suppressed):
    found = codes(f"import torch\nx = torch.ones(1).cuda()  {comment}\n")
    assert (found == []) is suppressed


def test_noqa_on_last_line_of_statement():
    source = "import torch\nx = torch.ones(\n    1\n).cuda()  # noqa: XLA104\n"
    assert codes(source) == []
    source = "import torch\ny = f(\n    torch.ones(1).cuda(),\n)  # noqa: XLA104\n"
    assert codes(source) == []


def test_noqa_in_string_does_not_count():
    assert codes('import torch\nx = torch.ones(1).cuda(); s = "# noqa"\n') == [(2, "XLA104")]
    assert noqa.noqa_map('s = "# noqa"\n') == {}


def test_disable_file():
    assert codes("# xlalint: disable-file\nimport torch\nx.cuda()\n") == []
    late = "import torch\n" + "\n" * 12 + "# xlalint: disable-file\nx.cuda()\n"
    assert codes(late) == [(15, "XLA104")]


def test_fixing_other_tool_noqa_is_left_alone():
    source = "import torch\nx = torch.ones(1).cuda()  # noqa: E501\n"
    fixed = fix_source(source, "t.py").source
    assert "# noqa: E501" in fixed and ".cuda()" not in fixed


def test_fix_never_writes_unparseable_code(monkeypatch):
    import xlalint.fixers.apply as apply

    def broken(source, fixes, line_length=None):
        return source + "\ndef (:\n", list(fixes)

    monkeypatch.setattr(apply, "apply_fixes", broken)
    source = "import torch\nx = torch.ones(1).cuda()\n"
    result = fix_source(source, "t.py")
    assert result.source == source
    assert result.error and "does not parse" in result.error


def test_fix_that_never_converges_is_reported(monkeypatch):
    import xlalint.fixers.apply as apply

    counter = iter(range(1000))

    def flapping(source, fixes, line_length=None):
        return source + f"# pass {next(counter)}\n", list(fixes)

    monkeypatch.setattr(apply, "apply_fixes", flapping)
    source = "import torch\nx = torch.ones(1).cuda()\n"
    result = fix_source(source, "t.py")
    assert result.source == source
    assert "did not converge" in result.error


def test_config_discovery_and_unknown_keys(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nignore = ["XLA104"]\ntarget-version = "2.3"\n')
    settings = ConfigFinder(None, rules_by_code()).for_path(tmp_path / "pkg" / "train.py")
    assert settings.ignore == ("XLA104",) and settings.target_version == (2, 3)
    assert "XLA104" not in settings.enabled_codes(["XLA104", "XLA101"])

    (tmp_path / "pkg" / "xlalint.toml").write_text('select = ["XLA1"]\nbogus = 1\n')
    with pytest.raises(ConfigError, match="unknown key `bogus`"):
        ConfigFinder(None, rules_by_code()).for_path(tmp_path / "pkg" / "train.py")


def test_config_rule_options_are_checked(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint.rules.XLA104]\nnope = 1\n")
    with pytest.raises(ConfigError, match="unknown option `nope` for rule XLA104"):
        ConfigFinder(None, rules_by_code()).for_path(tmp_path / "train.py")
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint.rules.XLA999]\n")
    with pytest.raises(ConfigError, match="unknown rule `XLA999`"):
        ConfigFinder(None, rules_by_code()).for_path(tmp_path / "train.py")


def test_per_file_ignores(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint.per-file-ignores]\n"scripts/*" = ["XLA104"]\n')
    settings = ConfigFinder(None, rules_by_code()).for_path(tmp_path / "scripts" / "a.py")
    source = "import torch\nx = torch.ones(1).cuda()\n"
    assert lint_source(source, str(tmp_path / "scripts" / "a.py"), settings) == []
    assert lint_source(source, str(tmp_path / "train.py"), settings) != []


def test_config_error_is_usage_error(tmp_path, cli):
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\nselekt = []\n")
    (tmp_path / "train.py").write_text("import torch\n")
    result = cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert b"unknown key `selekt`" in result.stderr


def test_decode_errors():
    with pytest.raises(SourceError, match="UTF-8"):
        decode(b"x = '\xff'\n")
    with pytest.raises(SourceError, match="NUL"):
        decode(b"x\0y")
    assert decode(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n").text.endswith("'\xe9'\n")


def test_write_atomic_keeps_encoding_and_leaves_no_temp(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    original = decode(path.read_bytes())
    write_atomic(path, original, original.text.replace("x =", "y ="))
    assert path.read_bytes() == b"# -*- coding: latin-1 -*-\ny = '\xe9'\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_write_to_vanished_file_is_an_error(tmp_path):
    path = tmp_path / "gone.py"
    path.write_text("import torch\n")
    original = decode(path.read_bytes())
    path.unlink()
    with pytest.raises(SourceError, match="removed"):
        write_atomic(path, original, "x")
    assert not path.exists()
