"""SARIF output validates against the SARIF 2.1.0 schema and carries what GitHub
code scanning needs: rules with help text, results with physical locations."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from support import CUDA_SCRIPT

SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "sarif-schema-2.1.0.json"
LOCAL_SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"


def schema() -> dict:
    for candidate in (SCHEMA, LOCAL_SCHEMA):
        if candidate.is_file():
            return json.loads(candidate.read_text())
    pytest.fail("SARIF schema not found")


def test_sarif_validates(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    result = cli("check", "--output-format", "sarif", ".", cwd=tmp_path)
    assert result.returncode == 2
    log = json.loads(result.stdout)
    jsonschema.validate(log, schema(), cls=jsonschema.Draft4Validator)
    run = log["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["XLA104"]["help"]["text"]
    assert "XLA000" in rules
    results = run["results"]
    assert {r["ruleId"] for r in results} == {"XLA104", "XLA000"}
    cuda = next(r for r in results if r["ruleId"] == "XLA104")
    location = cuda["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "train.py"
    assert location["region"]["startLine"] == 3 and location["region"]["startColumn"] == 9
    assert rules[cuda["ruleId"]] == run["tool"]["driver"]["rules"][cuda["ruleIndex"]]
    assert cuda["fixes"][0]["artifactChanges"][0]["replacements"]


def test_sarif_without_findings_validates(tmp_path, cli):
    (tmp_path / "ok.py").write_text("import torch\n")
    log = json.loads(cli("check", "--output-format", "sarif", ".", cwd=tmp_path).stdout)
    jsonschema.validate(log, schema(), cls=jsonschema.Draft4Validator)
    assert log["runs"][0]["results"] == []


def _notebook(path: Path, sources: list[str], *, ensure_ascii: bool = False, as_lines: bool = True) -> str:
    """A notebook with a markdown cell first, then one code cell per source."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# Title"))
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    data = json.loads(nbformat.writes(nb))
    for cell in data["cells"]:
        cell["source"] = cell["source"] if as_lines else "".join(cell["source"])
    text = json.dumps(data, indent=1, ensure_ascii=ensure_ascii) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


def _region_text(text: str, region: dict) -> str:
    assert region["startLine"] == region["endLine"]
    line = text.splitlines()[region["startLine"] - 1]
    return line[region["startColumn"] - 1 : region["endColumn"] - 1]


def test_sarif_locates_notebook_findings_on_the_lines_of_the_ipynb_file(tmp_path, cli):
    """A SARIF viewer shows the file on disk: the region is the JSON text of the code in
    the cell's source (escapes counted); the cell and the location in it come along."""
    cells = ["import torch\nimport torch_xla", "x = torch.ones(3, 4)\nmodel = torch.nn.Linear(4, 2).cuda()"]
    lines = _notebook(tmp_path / "lines.ipynb", cells)
    escaped_cells = [cells[0], 'name = "é\\"😀"; y = model(x.cuda())\n']
    escaped = _notebook(tmp_path / "escaped.ipynb", escaped_cells, ensure_ascii=True, as_lines=False)
    log = json.loads(cli("check", "--no-cache", "--output-format", "sarif", ".", cwd=tmp_path).stdout)
    jsonschema.validate(log, schema(), cls=jsonschema.Draft4Validator)
    results = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r for r in log["runs"][0]["results"]}
    assert set(results) == {"lines.ipynb", "escaped.ipynb"}

    first = results["lines.ipynb"]
    location = first["locations"][0]
    region = location["physicalLocation"]["region"]
    assert _region_text(lines, region) == "torch.nn.Linear(4, 2).cuda()"
    assert lines.splitlines()[region["startLine"] - 1].strip() == '"model = torch.nn.Linear(4, 2).cuda()"'
    assert location["logicalLocations"] == [
        {"name": "cell 3", "fullyQualifiedName": "/cells/2/source", "kind": "property"}
    ]
    assert location["properties"] == {
        "cell": 3,
        "cellRegion": {"startLine": 2, "startColumn": 9, "endLine": 2, "endColumn": 37},
    }
    assert first["message"]["text"].endswith("(XLA104 cuda-device; cell 3, line 2, column 9)")
    assert "fixes" not in first  # the fix edits the cell's code, not the file's JSON text

    second = results["escaped.ipynb"]
    region = second["locations"][0]["physicalLocation"]["region"]
    assert _region_text(escaped, region) == "x.cuda()"
    assert second["locations"][0]["properties"]["cellRegion"]["startColumn"] == 26  # characters in the cell


def test_sarif_regions_of_notebooks_checked_in_the_process_pool(tmp_path, cli):
    from xlalint.engine.runner import PARALLEL_THRESHOLD

    texts = {
        f"nb{i:02}.ipynb": _notebook(tmp_path / f"nb{i:02}.ipynb", ["import torch\n" * (i + 1) + "m = x.cuda()"])
        for i in range(PARALLEL_THRESHOLD + 1)
    }
    log = json.loads(cli("check", "--no-cache", "--output-format", "sarif", ".", cwd=tmp_path).stdout)
    results = log["runs"][0]["results"]
    assert len(results) == len(texts)
    for result in results:
        physical = result["locations"][0]["physicalLocation"]
        assert _region_text(texts[physical["artifactLocation"]["uri"]], physical["region"]) == "x.cuda()"
