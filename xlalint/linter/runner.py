"""Checking and fixing many files: per-file settings, a result cache, and a process
pool when there are enough files to pay for it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xlalint import __version__
from xlalint.linter import findings_json
from xlalint.linter import source as sourcefile
from xlalint.linter.config import Settings
from xlalint.linter.engine import SYNTAX_ERROR, error_finding, lint_source
from xlalint.linter.fixing import describe
from xlalint.linter.model import Finding, line_count

# Below this many files a process pool costs more to start than it saves.
PARALLEL_THRESHOLD = 12
# A cache entry larger than this was not written by xlalint (8 MiB of source at most).
MAX_ENTRY_BYTES = 64 * 1024 * 1024


@dataclass
class FileReport:
    path: str
    findings: list[Finding] = field(default_factory=list)  # what remains
    fixed: list[Finding] = field(default_factory=list)  # what a fix applied
    source: str | None = None
    fixed_source: str | None = None
    error: str | None = None  # a fix that could not be written, and why
    noqa_added: int = 0  # lines given a noqa comment by --add-noqa

    @property
    def unreadable(self) -> bool:
        return any(f.code == SYNTAX_ERROR[0] for f in self.findings)

    @property
    def changed(self) -> bool:
        return self.fixed_source is not None and self.fixed_source != self.source


@dataclass(frozen=True)
class Job:
    path: str
    settings: Settings
    fix: bool = False
    unsafe: bool = False
    write: bool = True
    cache_dir: str | None = None
    add_noqa: bool = False


@functools.cache
def code_fingerprint() -> str:
    """The name, size and modification time of every module that decides findings and
    fixes: an edited rule (a checkout, a development install, a patched release with
    the same version number) must not be answered from entries its old code wrote.
    Statting some forty files costs a quarter of a millisecond; hashing them, more."""
    package = Path(__file__).resolve().parent.parent
    parts = []
    folders = ["linter", "rules", "fixers"]
    while folders:  # a rule's parts are a package inside `rules/`
        folder = folders.pop()
        with os.scandir(package / folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    stat = entry.stat()
                    parts.append(f"{folder}/{entry.name}:{stat.st_size}:{stat.st_mtime_ns}")
                elif entry.is_dir() and entry.name != "__pycache__":
                    folders.append(f"{folder}/{entry.name}")
    return "\n".join(sorted(parts))


class Cache:
    """Findings of unchanged files, keyed by (xlalint version and code, settings, path,
    source)."""

    def __init__(self, folder: Path):
        self.folder = folder

    @staticmethod
    def key(job: Job, text: str) -> str:
        digest = hashlib.sha256()
        for part in (__version__, code_fingerprint(), repr(job.settings), job.path, text):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
        return digest.hexdigest()

    def get(self, key: str, text: str) -> list[Finding] | None:
        """The cached findings for ``key``, or None. Entries come from the working
        tree, so they are untrusted: anything unreadable or not exactly what ``put``
        writes is a miss (and is rewritten by the next ``put``)."""
        try:
            data = sourcefile.read_regular(self.folder / key[:2] / key, MAX_ENTRY_BYTES)
            return findings_json.loads(data, key, line_count(text))
        except (OSError, sourcefile.SourceError, findings_json.InvalidEntry):
            return None

    def put(self, key: str, findings: list[Finding]) -> None:
        folder = self.folder / key[:2]
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        try:
            if not self.folder.exists():
                self.folder.mkdir(parents=True, exist_ok=True)
                (self.folder / ".gitignore").write_text("# Automatically created by xlalint.\n*\n")
                (self.folder / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
            folder.mkdir(exist_ok=True)
            if self.folder.is_symlink() or folder.is_symlink():
                return  # shipped by someone else to make us write elsewhere
            with open(tmp, "xb") as handle:
                handle.write(findings_json.dumps(key, findings))
            os.replace(tmp, folder / key)  # over whatever was there, a corrupt entry included
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                tmp.unlink()
            # A cache that cannot be written is only slower.


def process(job: Job) -> FileReport:
    path = Path(job.path)
    if path.suffix == ".ipynb":
        from xlalint.linter.notebook import process_notebook

        return process_notebook(job)
    try:
        original = sourcefile.read(path)
    except sourcefile.SourceError as exc:
        return FileReport(job.path, [error_finding(job.path, str(exc), exc.line, exc.col)])
    try:
        return process_text(job, original)
    except Exception as exc:  # a bug in a rule costs one file, not the run
        return internal_error(job.path, exc, original.text)


def internal_error(path: str, exc: BaseException, text: str | None = None) -> FileReport:
    message = f"internal error while checking: {describe(exc)}"
    return FileReport(path, [error_finding(path, message)], source=text)


def process_text(job: Job, original: sourcefile.SourceFile, stdin: bool = False) -> FileReport:
    text = original.text
    if job.add_noqa:
        return _add_noqa(job, original, lint_source(text, job.path, job.settings))
    if not job.fix:
        cache = Cache(Path(job.cache_dir)) if job.cache_dir and not stdin else None
        key = Cache.key(job, text) if cache else ""
        cached = cache.get(key, text) if cache else None
        if cached is not None:
            return FileReport(job.path, cached, source=text)
        findings = lint_source(text, job.path, job.settings)
        if cache:
            cache.put(key, findings)
        return FileReport(job.path, findings, source=text)
    from xlalint.linter.fixing import fix_source

    result = fix_source(text, job.path, job.settings, unsafe=job.unsafe)
    report = FileReport(job.path, result.remaining, result.applied, text, result.source, result.error)
    if job.write and not stdin and report.changed:
        try:
            sourcefile.write_atomic(Path(job.path), original, result.source)
        except (sourcefile.SourceError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            report.error = f"not written: {reason}"
            report.findings = lint_source(text, job.path, job.settings)
            report.fixed, report.fixed_source = [], text
    return report


def _add_noqa(job: Job, original: sourcefile.SourceFile, findings: list[Finding]) -> FileReport:
    from xlalint.linter.noqa import add_noqa

    new, count = add_noqa(original.text, findings)
    report = FileReport(job.path, findings, source=original.text, fixed_source=new, noqa_added=count)
    if count and job.write:
        try:
            sourcefile.write_atomic(Path(job.path), original, new)
        except (sourcefile.SourceError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            report.error, report.fixed_source, report.noqa_added = f"not written: {reason}", original.text, 0
    return report


def cached_report(job: Job) -> FileReport | None:
    """The report of a check whose findings are in the cache, else None (also for
    anything but a plain check, and for a file that cannot be read: ``process`` says why)."""
    if job.fix or job.add_noqa or not job.cache_dir or job.path.endswith(".ipynb"):
        return None
    try:
        original = sourcefile.read(Path(job.path))
    except sourcefile.SourceError:
        return None
    key = Cache.key(job, original.text)
    findings = Cache(Path(job.cache_dir)).get(key, original.text)
    return None if findings is None else FileReport(job.path, findings, source=original.text)


def process_all(jobs: Sequence[Job]) -> list[FileReport]:
    writing = {Path(os.path.realpath(job.path)).parent for job in jobs if job.fix and job.write}
    if writing:
        sourcefile.remove_stale_temps(sorted(writing))
    # Cached files first, here: a warm rerun then starts no process pool.
    reports: list[FileReport | None] = [cached_report(job) for job in jobs]
    pending = [job for job, report in zip(jobs, reports) if report is None]
    cores = os.cpu_count() or 1
    if len(pending) < PARALLEL_THRESHOLD or cores < 2:
        done = [process(job) for job in pending]
    else:
        from concurrent.futures import ProcessPoolExecutor  # only when there is work to share

        with ProcessPoolExecutor(max_workers=cores) as pool:
            done = list(pool.map(process, pending, chunksize=max(1, len(pending) // (4 * cores))))
    computed = iter(done)
    return [report if report is not None else next(computed) for report in reports]
