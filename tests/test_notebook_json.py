"""A notebook fix rewrites only the `source` of the cells it changes: every other byte
of the file stays as it was (numbers, escapes, duplicate keys, key order, layout), and a
notebook whose sources cannot be rewritten exactly is refused, untouched."""

from __future__ import annotations

import json

import nbformat
import pytest
from support import run_cli

from xlalint.engine.notebook import Notebook, NotebookError
from xlalint.engine.notebook_json import replace_sources

# Everything a JSON writer would reflow: a number beyond a double (`1e400` comes back as
# `Infinity`, which is not JSON), `1E5`, `\/` and `\u00e9` escapes, a duplicate key,
# keys out of nbformat's order, three-space indentation. Cell 2's SOURCE is what changes.
TEMPLATE = """{
   "nbformat_minor": 5,
   "metadata": {"big": 1e400, "exp": 1E5, "url": "http:\\/\\/x", "name": "caf\\u00e9", "name": "tea",
      "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
   "cells": [
      {
         "source": ["# caf\\u00e9 \\/ notes"],
         "metadata": {"scale": 1e400},
         "cell_type": "markdown",
         "id": "a1"
      },
      {
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["caf\\u00e9\\n"]}],
         "source": SOURCE,
         "metadata": {"tags": [], "tags": ["x"], "lr": 1E-3},
         "execution_count": 1,
         "id": "b2",
         "cell_type": "code"
      }
   ],
   "nbformat": 4
}
"""
BEFORE = """[
            "import torch\\n",
            "s = \\"caf\\u00e9 \\/\\"\\n",
            "m = torch.nn.Linear(2, 2).cuda()"
         ]"""
AFTER = """[
            "import torch\\n",
            "import torch_xla\\n",
            "\\n",
            "s = \\"caf\\u00e9 \\/\\"\\n",
            "m = torch.nn.Linear(2, 2).to(torch_xla.device())"
         ]"""


def test_a_fix_changes_only_the_source_of_the_cells_it_changes(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(TEMPLATE.replace("SOURCE", BEFORE))
    result = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert path.read_text() == TEMPLATE.replace("SOURCE", AFTER)
    nb = nbformat.reads(path.read_text(), as_version=4)
    nbformat.validate(nb)
    assert nb.cells[1].source.endswith('s = "café /"\nm = torch.nn.Linear(2, 2).to(torch_xla.device())')


def test_a_source_written_as_one_string_stays_one_string_in_a_compact_file(tmp_path):
    data = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": "c", "metadata": {}, "outputs": [], "source": "S"}
        ],
        "metadata": {"x": 1},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    template = json.dumps(data, separators=(",", ":")).replace("1}", "1E5}")  # no line break at all
    path = tmp_path / "nb.ipynb"
    path.write_text(template.replace('"S"', json.dumps("import torch\nx = torch.ones(2).cuda()\n")))
    assert run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    fixed = json.dumps("import torch\nimport torch_xla\n\nx = torch.ones(2).to(torch_xla.device())\n")
    assert path.read_text() == template.replace('"S"', fixed)
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))


def test_non_ascii_text_stays_as_it_was_written(tmp_path):
    """A file with raw UTF-8 gets raw UTF-8 in its new lines; its escapes elsewhere stay."""
    text = TEMPLATE.replace("SOURCE", BEFORE).replace('"tea"', '"thé"')
    path = tmp_path / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    edited = text.replace('"m = torch.nn.Linear(2, 2).cuda()"', '"m = torch.nn.Linear(2, 2).cuda()  # é"')
    path.write_text(edited, encoding="utf-8")
    assert run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    after = AFTER.replace("to(torch_xla.device())", "to(torch_xla.device())  # é")
    assert path.read_text(encoding="utf-8") == TEMPLATE.replace("SOURCE", after).replace('"tea"', '"thé"')


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ('"source": SOURCE,', "cell 2 has more than one `source` key"),
        ('"nbformat_minor": 5,', "more than one `cells` key"),
    ],
)
def test_a_notebook_whose_sources_are_ambiguous_is_refused_untouched(tmp_path, where, why):
    duplicate = {
        '"source": SOURCE,': '"source": "import torch",\n         "source": SOURCE,',
        '"nbformat_minor": 5,': '"cells": [],\n   "nbformat_minor": 5,',
    }[where]
    text = TEMPLATE.replace(where, duplicate).replace("SOURCE", BEFORE)
    path = tmp_path / "nb.ipynb"
    path.write_bytes(text.encode())
    result = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode != 0
    assert path.read_bytes() == text.encode()
    errors = result.stderr.decode().splitlines()
    assert len(errors) == 1 and why in errors[0] and errors[0].endswith("notebook left unchanged"), errors


def test_an_empty_source_list_gets_lines_indented_as_its_key():
    text = '{\n  "cells": [\n    {\n      "cell_type": "code",\n      "source": []\n    }\n  ]\n}\n'
    new = replace_sources(text, {1: "import torch\nx = 1"})
    assert new == (
        '{\n  "cells": [\n    {\n      "cell_type": "code",\n      "source": [\n'
        '        "import torch\\n",\n        "x = 1"\n      ]\n    }\n  ]\n}\n'
    )
    assert replace_sources(new, {1: ""}) == text


def test_a_lone_surrogate_is_written_as_its_escape():
    text = '{"cells": [{"cell_type": "code", "source": ["x = 1"]}], "metadata": {"n": "\\u00e9"}}'
    new = replace_sources(text.replace("\\u00e9", "é"), {1: "s = '\ud800'"})
    assert "\"s = '\\ud800'\"" in new
    assert json.loads(new)["cells"][0]["source"] == ["s = '\ud800'"]


def test_the_notebook_reads_back_what_a_fix_wrote():
    nb = Notebook(TEMPLATE.replace("SOURCE", BEFORE))
    fixed = str(nb.module).replace(".cuda()", ".to('xla')")
    text, module = nb.render(fixed)
    assert Notebook(text).module == module
    with pytest.raises(NotebookError):
        replace_sources("[]", {1: "x"})
