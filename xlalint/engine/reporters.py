"""Output formats: concise (``text`` is its old name), json, json-lines, github, sarif,
junit; ``full`` (code frames) is in :mod:`xlalint.engine.full_format`.

What comes from the working tree (file names, messages quoting source) is escaped for
each format (:mod:`xlalint.engine.escaping`). Lines and columns are 1-based everywhere. JSON uses ruff's field names, so tools
written for ruff's JSON read ours. JSON and SARIF carry a fix's text edits; those
are computed (libcst) only when a finding has a fix and the format asks for it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from xlalint import __version__
from xlalint.engine.escaping import json_text, printable, uri_reference, xml_text
from xlalint.engine.rule_docs import public_url, rule_url
from xlalint.model import PORT_NEEDS_FIX, Finding

# Every output format, in the order --help lists them (`text` is concise's old name).
# `grouped` and `pylint` are rendered by :mod:`xlalint.engine.text_report`, with concise.
FORMATS = ("full", "concise", "text", "grouped", "pylint", "json", "json-lines", "github", "sarif", "junit")
SYNTAX_ERROR_DOC = {
    "code": "XLA000",
    "name": "syntax-error",
    "summary": "The file cannot be read or parsed as Python",
    "explanation": "xlalint reports a file that does not parse, is not valid in its encoding, "
    "cannot be read, is not a valid notebook or is too large as one XLA000 finding, checks the other "
    "files, and exits with status 2. It is not a rule to select or ignore: a file that cannot be checked is "
    "always reported.",
}

Sources = dict[str, str]
# Fewer files with fixes than this are computed in this process: a pool costs more.
FILES_WORTH_A_POOL = 4


def _location(row: int, col: int) -> dict[str, int]:
    return {"row": row, "column": col + 1}


class FixEdits:
    """The text edits of each finding's fix, computed per file on first use: one libcst
    parse for all the fixes of a file, and none for a file without fixes."""

    def __init__(self, findings: Sequence[Finding], sources: Sources | None):
        self.sources = sources or {}
        self.fixes: dict[str, list] = {}
        for finding in findings:
            if finding.fix is not None and finding.path in self.sources:
                self.fixes.setdefault(finding.path, []).append(finding.fix)
        self.by_file: dict[str, dict] = {}

    def computed(self, finding: Finding) -> bool:
        return finding.fix is not None and finding.path in self.sources

    def all_computed(self, findings: Sequence[Finding]) -> Sequence[Finding]:
        """``findings``, once every file's edits are computed (:meth:`compute_all`)."""
        self.compute_all()
        return findings

    def compute_all(self) -> None:
        """Compute every file's edits now, on every core when many files have fixes:
        one libcst parse and position pass per file (about a second for a large one),
        which made a JSON or SARIF report of a large tree mostly serial work in this
        process. Any failure of the pool leaves the files to be computed here, one by
        one, on first use."""
        from xlalint.engine.runner import available_cores

        pending = [path for path in self.fixes if path not in self.by_file]
        cores = min(available_cores(), len(pending))
        if len(pending) < FILES_WORTH_A_POOL or cores < 2:
            return
        from concurrent.futures import ProcessPoolExecutor

        from xlalint.fixers.apply import file_edits

        texts = [str(self.sources[path]) for path in pending]
        fixes = [self.fixes[path] for path in pending]
        try:
            with ProcessPoolExecutor(max_workers=cores) as pool:
                results = list(pool.map(file_edits, texts, fixes, chunksize=max(1, len(pending) // (4 * cores))))
        except Exception:  # a pool that cannot start or a result that does not pickle
            return
        self.by_file.update(zip(pending, results))

    def text_edits(self, finding: Finding) -> list:
        """The finding's fix as ``TextEdit``s of its file's text (in a notebook, of the
        module of its code cells); [] when there is none or it does not apply."""
        if not self.computed(finding):
            return []
        if finding.path not in self.by_file:
            from xlalint.fixers.apply import file_edits

            self.by_file[finding.path] = file_edits(self.sources[finding.path], self.fixes.get(finding.path, []))
        return self.by_file[finding.path].get(finding.fix, [])

    def of(self, finding: Finding) -> list[dict]:
        """The finding's fix edits as ruff's JSON gives them."""
        edits = self.text_edits(finding)
        if not edits:
            return []
        source = self.sources[finding.path]
        # In a notebook the fix is on the module of its code cells: rows are given in the cell.
        row = source.locate if finding.cell is not None and hasattr(source, "locate") else lambda n: (None, n)
        return [
            {
                "content": edit.content,
                "location": {"row": row(edit.start[0])[1], "column": edit.start[1]},
                "end_location": {"row": row(edit.end[0])[1], "column": edit.end[1]},
            }
            for edit in edits
        ]


def _filename(path: str) -> str:
    return json_text(path if path in ("-", "<stdin>") else os.path.abspath(path))


def finding_to_json(finding: Finding, sources: Sources | None = None, edits: FixEdits | None = None) -> dict:
    """One finding as ruff's JSON object. Fix edits need the file's source; a fix
    whose edits were computed and came out empty does not apply: ``fix`` is null."""
    edits = edits if edits is not None else FixEdits([finding], sources)
    fix = None
    if finding.fix is not None:
        fix_edits = edits.of(finding)
        if fix_edits or not edits.computed(finding):
            fix = {
                "applicability": finding.fix.applicability,
                "message": finding.fix.message,
                "edits": fix_edits,
            }
    span = finding.span
    obj = {
        "cell": finding.cell,
        "code": finding.code,
        "end_location": _location(span.end_line, span.end_col),
        "filename": _filename(finding.path),
        "fix": fix,
        "location": _location(span.line, span.col),
        "message": json_text(finding.message),
        "name": finding.name,
        "noqa_row": finding.noqa_row,
        # ruff's: every finding is an error (as SARIF's level says).
        "severity": "error",
        "url": rule_url(finding.name, finding.code),
    }
    if finding.after_port:
        obj["after_port"] = True  # only when true: other findings keep ruff's fields
    if finding.fix_withheld is not None:
        obj["fix_withheld"] = json_text(finding.fix_withheld)  # only when set, as `after_port`
    return obj


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe)


def text_line(finding: Finding, unsafe: bool = False) -> str:
    marker = " [*]" if applicable(finding, unsafe) else ""
    after_port = AFTER_PORT if finding.after_port else ""
    return f"{location(finding)}: {finding.code}{marker} {printable(finding.message)}{after_port}"


# After the message of a finding that follows from the port (the others' lines are as ruff's).
AFTER_PORT = " (after the port)"


def location(finding: Finding) -> str:
    """``path:LINE:COL``, or ``nb.ipynb:cell N:LINE:COL`` in a notebook (the path escaped
    for a terminal)."""
    s = finding.span
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{printable(finding.path)}:{cell}{s.line}:{s.col + 1}"


def summary(
    findings: Sequence[Finding],
    unsafe: bool,
    fixed: int = 0,
    command: str = "check",
    after_port: int = 0,
    hint_unsafe: bool = True,
    checked: int | None = None,
) -> str:
    """ruff's summary; ``after_port``: how many of the ``fixed`` followed from the port;
    ``checked``: how many findings ``check`` reported before ``fix`` (said when the
    count differs, and why);
    ``hint_unsafe``: say how many unsafe fixes ``--unsafe-fixes`` would add (not when
    the settings turn unsafe fixes off: ``unsafe-fixes = false``, ``--no-unsafe-fixes``)."""
    lines = []
    if not findings:
        lines.append(
            f"Found {fixed} error{'s' if fixed != 1 else ''} "
            f"({fixed} fixed, 0 remaining{after_port_note(after_port)}{checked_note(checked, fixed)})."
            if fixed
            else "All checks passed!"
        )
        return "\n".join(lines)
    total = len(findings) + fixed
    if fixed:
        lines.append(
            f"Found {total} error{'s' if total != 1 else ''} "
            f"({fixed} fixed, {len(findings)} remaining{after_port_note(after_port)}{checked_note(checked, total)})."
        )
    else:
        lines.append(f"Found {total} error{'s' if total != 1 else ''}.")
    safe = sum(1 for f in findings if applicable(f, unsafe))
    hidden = sum(1 for f in findings if f.fix is not None and not applicable(f, unsafe)) if hint_unsafe else 0
    # ruff 0.17's wording: "[*] 1 fixable with `--fix` (1 unsafe fix available with
    # `--fix --unsafe-fixes`)." or, with no fix that applies, the parenthesis alone.
    hidden_note = f"{hidden} unsafe fix{'es' if hidden != 1 else ''} available with `xlalint fix --unsafe-fixes`"
    if safe and command == "check":
        fixable = f"[*] {safe} fixable with `xlalint fix{' --unsafe-fixes' if unsafe else ''}`"
        lines.append(f"{fixable} ({hidden_note})." if hidden else f"{fixable}.")
    elif hidden:
        lines.append(f"{hidden_note}.")
    return "\n".join(lines)


def withheld_notes(findings: Sequence[Finding]) -> list[str]:
    """One ``note:`` line per finding whose fix the fix loop withheld, and why."""
    return [
        f"note: {location(f)}: {f.code} fix {printable(f.fix_withheld)}" for f in findings if f.fix_withheld is not None
    ]


def checked_count(reports) -> int | None:
    """How many findings ``check`` reports on the files ``fix`` was given (None when
    no file was fixed)."""
    counts = [r.checked if r.checked is not None else len(r.findings) + len(r.fixed) for r in reports]
    return sum(counts) if any(r.checked is not None for r in reports) else None


def checked_note(checked: int | None, total: int) -> str:
    """Why ``fix``'s count is not ``check``'s: a fix that removes or rewrites code takes
    the findings in that code with it (counted neither fixed nor remaining, as ruff
    counts), and the code the fixes write can have findings of its own."""
    if checked is None or checked == total:
        return ""
    if checked > total:
        gone = checked - total
        return f"; `check` found {checked}: {gone} went with code a fix rewrote"
    more = total - checked
    return f"; `check` found {checked}: {more} more appeared as the fixes changed the code"


def port_notes(findings: Sequence[Finding], unsafe: bool) -> list[str]:
    """A port that only an unsafe fix completes says so: one ``note:`` line per finding
    whose fix the port needs (the test that is the only path to the accelerator) and
    that was not applied: without it the script imports torch_xla and trains on the CPU."""
    return [
        f"note: {location(f)}: the port is not complete: the device is still chosen by a test that is "
        f"False on XLA, so the script would run on the CPU; `xlalint fix --unsafe-fixes` applies the "
        f"{f.code} fix it needs"
        for f in findings
        if f.fix is not None and f.fix.message == PORT_NEEDS_FIX and not applicable(f, unsafe)
    ]


def after_port_note(count: int) -> str:
    """What the fix summary says of the fixes that followed from the port: XLA104's
    fixes made the file an XLA script, and the XLA-script rules then applied."""
    if not count:
        return ""
    return f"; {count} of them appeared once the fixes made the file an XLA script"


def statistics(findings: Sequence[Finding], unsafe: bool, as_json: bool = False) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = {(f.code, f.name) for f in findings if applicable(f, unsafe)}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if as_json:
        return json.dumps(
            [{"code": code, "name": name, "count": n, "fixable": (code, name) in fixable} for (code, name), n in rows],
            indent=2,
        )
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "\n".join(
        f"{n:>{width}}\t{code}\t{'[*]' if (code, name) in fixable else '[ ]'} {name}" for (code, name), n in rows
    )


def _github_escape(value: str, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        value = value.replace(":", "%3A").replace(",", "%2C")
    return value


def render_github(findings: Sequence[Finding], sources: Sources | None = None) -> str:
    """GitHub workflow commands. GitHub places an annotation on the file as it is on
    disk: a notebook finding gets the lines of the .ipynb's JSON text (as SARIF does),
    none when that text is not known; its message names the cell and the line in it."""
    lines = []
    for f in findings:
        s = f.span
        props = f"title={_github_escape(f'xlalint ({f.code})', True)},file={_github_escape(printable(f.path), True)}"
        region = (s.line, s.col + 1, s.end_line, s.end_col + 1) if f.cell is None else notebook_file_region(f, sources)
        if region is not None:
            line, column, end_line, end_column = region
            props += f",line={line},col={column},endLine={end_line},endColumn={end_column}"
        lines.append(f"::error {props}::{_github_escape(f'{location(f)}: {f.code} {printable(f.message)}')}")
    return "\n".join(lines)


def notebook_file_region(finding: Finding, sources: Sources | None) -> tuple[int, int, int, int] | None:
    """Where a notebook finding is in the .ipynb file's own text: (line, column, end
    line, end column), 1-based, the end exclusive; None when that text is not known
    (no sources given, or a CellText built from cells, as the language server does)."""
    source = (sources or {}).get(finding.path)
    file_region = getattr(source, "file_region", None)  # a notebook's CellText
    return file_region(finding) if file_region is not None else None


def _rule_docs() -> list[dict]:
    from xlalint.rules import all_rules

    docs = [SYNTAX_ERROR_DOC]
    docs += [
        {
            "code": r.code,
            "name": r.name,
            "summary": r.summary,
            "explanation": r.explanation.strip(),
            "fix": r.fix_availability,
        }
        for r in all_rules()
    ]
    return [{**doc, "url": rule_url(doc["name"], doc["code"])} for doc in docs]


def _sarif_uri(path: str) -> str:
    """A relative URI reference for a path under the working folder (percent-encoded:
    ``sp ace#frag.py`` is ``sp%20ace%23frag.py``), a ``file:`` URI for one outside it."""
    if path in ("-", "<stdin>"):
        return "stdin"
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.relative_to(Path.cwd())
        except ValueError:
            return p.as_uri()
    return uri_reference(p.as_posix())


def render_sarif(findings: Sequence[Finding], sources: Sources | None) -> str:
    fix_edits = FixEdits(findings, sources)
    fix_edits.compute_all()
    docs = _rule_docs()
    index = {doc["code"]: i for i, doc in enumerate(docs)}
    rules = [
        {
            "id": doc["code"],
            "name": doc["name"],
            "shortDescription": {"text": doc["summary"]},
            "fullDescription": {"text": doc["explanation"] or doc["summary"]},
            "help": {"text": doc["explanation"] or doc["summary"], "markdown": doc["explanation"] or doc["summary"]},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["xla", "pytorch"], "precision": "high", "problem.severity": "error"},
            # Only a public URL: the rule's full help is in `help` already (issue 41).
            **({"helpUri": public_url(doc["url"])} if public_url(doc["url"]) else {}),
        }
        for doc in docs
    ]
    results = []
    for f in findings:
        if f.cell is not None:
            result = _sarif_notebook_result(f, sources)
        else:
            s = f.span
            region = {"startLine": s.line, "startColumn": s.col + 1, "endLine": s.end_line, "endColumn": s.end_col + 1}
            result = {
                "message": {"text": json_text(f"{f.message} ({f.code} {f.name})")},
                "locations": [
                    {"physicalLocation": {"artifactLocation": {"uri": _sarif_uri(f.path)}, "region": region}}
                ],
            }
        result = {"ruleId": f.code, "ruleIndex": index.get(f.code, 0), "level": "error", **result}
        if f.fix_withheld is not None:
            result["properties"] = {"fixWithheld": json_text(f.fix_withheld)}
        # A notebook's fix edits its cells' code, not the file's JSON text: no SARIF fix.
        edits = fix_edits.of(f) if f.cell is None else []
        if f.fix is not None and edits:
            result["fixes"] = [
                {
                    "description": {"text": f"{f.fix.message} ({f.fix.applicability})"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": _sarif_uri(f.path)},
                            "replacements": [
                                {
                                    "deletedRegion": {
                                        "startLine": e["location"]["row"],
                                        "startColumn": e["location"]["column"],
                                        "endLine": e["end_location"]["row"],
                                        "endColumn": e["end_location"]["column"],
                                    },
                                    "insertedContent": {"text": e["content"]},
                                }
                                for e in edits
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "xlalint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
                "columnKind": "unicodeCodePoints",
            }
        ],
    }
    return json.dumps(log, indent=2)


def _sarif_notebook_result(finding: Finding, sources: Sources | None) -> dict:
    """A notebook finding's message and location. Viewers (GitHub code scanning) show
    the region on the file as it is on disk, so the region is in the .ipynb's JSON
    text: the line of the cell's ``source`` string that holds the code, the column
    within it. The cell and the location in it (as the text and JSON formats give them)
    are in the message, a logical location and the location's properties."""
    s = finding.span
    cell_region = {"startLine": s.line, "startColumn": s.col + 1, "endLine": s.end_line, "endColumn": s.end_col + 1}
    physical: dict = {"artifactLocation": {"uri": _sarif_uri(finding.path)}}
    region = notebook_file_region(finding, sources)
    if region is not None:
        line, column, end_line, end_column = region
        physical["region"] = {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}
    location = {
        "physicalLocation": physical,
        "logicalLocations": [
            {
                "name": f"cell {finding.cell}",
                "fullyQualifiedName": f"/cells/{finding.cell - 1}/source",
                "kind": "property",
            }
        ],
        "properties": {"cell": finding.cell, "cellRegion": cell_region},
    }
    where = f"cell {finding.cell}, line {s.line}, column {s.col + 1}"
    return {
        "message": {"text": json_text(f"{finding.message} ({finding.code} {finding.name}; {where})")},
        "locations": [location],
    }


def render_junit(findings: Sequence[Finding]) -> str:
    """JUnit XML, well-formed whatever a file name or message holds: what XML 1.0 cannot
    carry is escaped as text first."""
    from xml.sax.saxutils import escape as escape_xml
    from xml.sax.saxutils import quoteattr as quote_xml

    def escape(text: str) -> str:
        return escape_xml(xml_text(text))

    def quoteattr(text: str) -> str:
        return quote_xml(xml_text(text))

    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.path, []).append(f)
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    out.append(f'<testsuites name="xlalint" tests="{max(len(findings), 1)}" failures="{len(findings)}" errors="0">')
    if not findings:
        out.append('  <testsuite name="xlalint" tests="1" failures="0" errors="0">')
        out.append('    <testcase name="No errors found" classname="xlalint"/>')
        out.append("  </testsuite>")
    for path, items in by_file.items():
        out.append(f'  <testsuite name={quoteattr(path)} tests="{len(items)}" failures="{len(items)}" errors="0">')
        for f in items:
            s = f.span
            out.append(
                f'    <testcase name={quoteattr(f"org.xlalint.{f.code}")} classname={quoteattr(path)} line="{s.line}" column="{s.col + 1}">'
            )
            out.append(
                f"      <failure message={quoteattr(f.message)}>{escape(f'line {s.line}, col {s.col + 1}, {f.message}')}</failure>"
            )
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out)


def render(fmt: str, findings: Sequence[Finding], *, sources: Sources | None = None, unsafe: bool = False) -> str:
    """The findings in ``fmt`` (no summary: the CLI adds that for text)."""
    edits = FixEdits(findings, sources)
    renderers: dict[str, Callable[[], str]] = {
        "text": lambda: "\n".join(text_line(f, unsafe) for f in findings),  # concise's old name
        "concise": lambda: "\n".join(text_line(f, unsafe) for f in findings),
        "json": lambda: json.dumps(
            [finding_to_json(f, sources, edits) for f in edits.all_computed(findings)], indent=2
        ),
        "json-lines": lambda: "\n".join(
            json.dumps(finding_to_json(f, sources, edits)) for f in edits.all_computed(findings)
        ),
        "github": lambda: render_github(findings, sources),
        "sarif": lambda: render_sarif(findings, sources),
        "junit": lambda: render_junit(findings),
    }
    return renderers[fmt]()
