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
