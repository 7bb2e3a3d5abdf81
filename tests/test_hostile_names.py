"""Outputs that no file name or quoted source can break: control characters and escape
sequences are shown escaped on a terminal, JUnit stays well-formed XML, SARIF URIs are
percent-encoded relative references, JSON is UTF-8 (U+FFFD for a byte that is not)."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlsplit

import jsonschema
import pytest
from support import run_cli

from xlalint.engine.escaping import json_text, printable, uri_reference, xml_text

SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"
# A script with a fixable finding (line 3) and one whose message quotes source holding an
# escape sequence and a bidi override (line 8).
SOURCE = (
    "import torch\n"
    "import torch_xla.distributed.xla_multiprocessing as xmp\n"
    "x = torch.ones(2).cuda()\n"
    "\n"
    "def _mp_fn(i):\n"
    "    pass\n"
    "\n"
    'xmp.spawn(_mp_fn, nprocs=len("\x1b[2J\u202e"))\n'
)
NAMES = [b"e\x1b[2Jvil.py", b"sp ace#frag.py", b"javascript:alert(1).py", b"new\nline.py", b"bell\x07\x0b.py"]
if sys.platform != "darwin":  # macOS refuses names that are not UTF-8
    NAMES.append(b"caf\xe9.py")
PLAIN = {"NO_COLOR": "", "FORCE_COLOR": ""}


@pytest.fixture
def hostile(tmp_path) -> Path:
    for name in NAMES:
        (tmp_path / os.fsdecode(name)).write_bytes(SOURCE.encode())
    return tmp_path


def check(folder: Path, fmt: str) -> bytes:
    result = run_cli("check", "--no-cache", "--output-format", fmt, ".", cwd=folder, env=PLAIN)
    assert result.returncode == 1, result.stderr
    assert not result.stderr
    return result.stdout


@pytest.mark.parametrize("fmt", ["concise", "full", "github"])
def test_terminal_formats_show_control_characters_escaped(hostile, fmt):
    out = check(hostile, fmt).decode("utf-8")  # strict: no lone surrogate got through either
    for raw in ("\x1b", "\x07", "\x0b", "\u202e"):
        assert raw not in out
    assert "e\\x1b[2Jvil.py" in out and "bell\\x07\\x0b.py" in out
    assert 'nprocs=len("\\x1b[2J\\u202e")' in out
    if fmt == "concise":
        assert "\nnew\\nline.py:3:5: XLA104 [*] " in out
        if b"caf\xe9.py" in NAMES:
            assert "\ncaf\\xe9.py:3:5: XLA104 [*] " in out
    if fmt == "full":
        # The quoted source line in the frame is escaped as well.
        assert '8 | xmp.spawn(_mp_fn, nprocs=len("\\x1b[2J\\u202e"))' in out.splitlines()


def test_junit_is_well_formed_xml(hostile):
    root = ET.fromstring(check(hostile, "junit"))
    suites = {suite.get("name") for suite in root.iter("testsuite")}
    assert "e\\x1b[2Jvil.py" in suites and "bell\\x07\\x0b.py" in suites
    assert "new\nline.py" in suites  # a newline is XML; only what XML 1.0 forbids is escaped
    messages = [failure.get("message") for failure in root.iter("failure")]
    assert any('nprocs=len("\\x1b[2J\u202e")' in message for message in messages)


def test_sarif_uris_are_percent_encoded_relative_references(hostile):
    log = json.loads(check(hostile, "sarif"))
    jsonschema.validate(log, json.loads(SCHEMA.read_text()), cls=jsonschema.Draft4Validator)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]} | {
        change["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
        for fix in r.get("fixes", [])
        for change in fix["artifactChanges"]
    }
    assert {"sp%20ace%23frag.py", "javascript%3Aalert%281%29.py", "e%1B%5B2Jvil.py"} <= uris
    for uri in uris:
        parts = urlsplit(uri)
        assert not parts.scheme and not parts.fragment and not parts.query and not parts.netloc, uri
        assert unquote_to_bytes(uri) in NAMES, uri  # the reference names the file, byte for byte


def test_json_is_utf8_with_replacement_characters(hostile):
    out = check(hostile, "json")
    out.decode("utf-8")  # strict
    names = {Path(item["filename"]).name for item in json.loads(out)}
    assert {"e\x1b[2Jvil.py", "new\nline.py", "javascript:alert(1).py"} <= names
    if b"caf\xe9.py" in NAMES:
        assert "caf\ufffd.py" in names  # as ruff's lossy file names
    lines = check(hostile, "json-lines")
    assert all(json.loads(line)["filename"] for line in lines.decode("utf-8").splitlines())


def test_escaping_helpers():
    assert printable("a\x1b[31mb\n\u202e\udce9") == "a\\x1b[31mb\\n\\u202e\\xe9"
    assert printable("\tx = 1", keep_tabs=True) == "\tx = 1" and printable("\t") == "\\t"
    assert printable("plain ünïcode 日本") == "plain ünïcode 日本"
    assert json_text("caf\udce9.py") == "caf\ufffd.py"
    assert xml_text("a\x00b\x0bc\nd\ufffe") == "a\\x00b\\x0bc\nd\\ufffe"
    assert uri_reference("dir/sp ace#x?.py") == "dir/sp%20ace%23x%3F.py"
    assert uri_reference("a:b.py") == "a%3Ab.py"
