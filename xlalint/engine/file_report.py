"""What checking or fixing one file gave: the report the runner, the notebook code and
the CLI pass around (its own module, so that none of them imports another for it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from xlalint.model import SYNTAX_ERROR, Finding, error_finding


@dataclass
class FileReport:
    path: str
    findings: list[Finding] = field(default_factory=list)  # what remains
    fixed: list[Finding] = field(default_factory=list)  # what a fix applied
    source: str | None = None
    fixed_source: str | None = None
    error: str | None = None  # a fix that could not be written, and why
    noqa_added: int = 0  # lines given a noqa comment by --add-noqa
    not_written: str | None = None  # why a file was only checked though fixes were asked (not an error)
    # The local modules the file imports (paths as found), when the run follows imports.
    imports: list[str] | None = None
    # The file makes its program an XLA one (it imports torch_xla, or its port does), when
    # the run follows imports: what it imports is checked as part of an XLA program.
    xla_program: bool | None = None
    # What the file tells the local modules it imports, when the run follows imports:
    # module (real path) -> its functions whose results a step loop here iterates.
    told: dict[str, tuple[str, ...]] | None = None
    followed: bool = False  # checked because a checked file imports it (engine/follow.py)
    # Fixing: how many findings `check` reports on the file as it was (None: not fixed).
    checked: int | None = None

    @property
    def unreadable(self) -> bool:
        return any(f.code == SYNTAX_ERROR[0] for f in self.findings)

    @property
    def changed(self) -> bool:
        return self.fixed_source is not None and self.fixed_source != self.source


def internal_error(path: str, exc: BaseException, text: str | None = None) -> FileReport:
    """The report of a file a bug in a rule stopped: one finding saying so."""
    from xlalint.engine.fixing import describe  # here: a check imports no fixing

    message = f"internal error while checking: {describe(exc)}"
    return FileReport(path, [error_finding(path, message)], source=text)
