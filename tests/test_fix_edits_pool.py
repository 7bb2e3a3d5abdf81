"""JSON and SARIF fix edits of many files are computed on every core (one libcst parse
per file), and come out exactly as computed one file at a time in this process."""

from __future__ import annotations

import json

from xlalint.engine import reporters, runner
from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source

SCRIPT = """import torch
import torch_xla

def train_{i}(model, x):
    x = x.cuda()
    torch.cuda.empty_cache()
    torch.save(model.state_dict(), "m{i}.pt")
"""


def _findings_and_sources(files: int):
    sources = {f"train_{i}.py": SCRIPT.format(i=i) for i in range(files)}
    findings = [f for path, text in sources.items() for f in lint_source(text, path, Settings())]
    assert sum(f.fix is not None for f in findings) >= 2 * files
    return findings, sources


def test_edits_from_the_pool_are_the_edits_computed_one_file_at_a_time(monkeypatch):
    findings, sources = _findings_and_sources(6)
    monkeypatch.setattr(runner, "available_cores", lambda: 2)
    pooled = reporters.FixEdits(findings, sources)
    pooled.compute_all()
    assert set(pooled.by_file) == set(sources)  # computed up front, not on first use
    serial = reporters.FixEdits(findings, sources)
    assert [pooled.of(f) for f in findings] == [serial.of(f) for f in findings]
    assert any(pooled.of(f) for f in findings)
    rendered = json.loads(reporters.render("json", findings, sources=sources))
    assert [r["fix"] for r in rendered] == [
        json.loads(reporters.render("json", [f], sources=sources))[0]["fix"] for f in findings
    ]


def test_a_few_files_or_one_core_are_computed_here_on_first_use(monkeypatch):
    findings, sources = _findings_and_sources(reporters.FILES_WORTH_A_POOL - 1)
    monkeypatch.setattr(runner, "available_cores", lambda: 2)
    few = reporters.FixEdits(findings, sources)
    few.compute_all()
    assert few.by_file == {}
    findings, sources = _findings_and_sources(6)
    monkeypatch.setattr(runner, "available_cores", lambda: 1)
    one_core = reporters.FixEdits(findings, sources)
    one_core.compute_all()
    assert one_core.by_file == {}
