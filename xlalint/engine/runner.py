"""Checking and fixing many files: per-file settings, a result cache, and a process
pool when there are enough files to pay for it."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xlalint.analysis import project
from xlalint.engine import cache, stopping
from xlalint.engine import source as sourcefile
from xlalint.engine.config import Settings
from xlalint.engine.file_report import FileReport, internal_error
from xlalint.engine.lint import error_finding, lint_source, parsed_tree
from xlalint.engine.notebook import process_notebook
from xlalint.model import Finding

# Below this many files a process pool costs more to start than it saves.
PARALLEL_THRESHOLD = 12


@dataclass(frozen=True)
class Job:
    path: str
    settings: Settings
    fix: bool = False
    unsafe: bool = False
    write: bool = True
    cache_dir: str | None = None
    add_noqa: bool = False
    # Also say which local modules the file imports, found on the search path of the
    # script ``follow_from`` (the file itself when None): ``engine/follow.py``.
    follow: bool = False
    follow_from: str | None = None


def process(job: Job) -> FileReport:
    path = Path(job.path)
    if path.suffix == ".ipynb":
        return process_notebook(job)
    try:
        original = sourcefile.read(path)
    except sourcefile.SourceError as exc:
        return FileReport(job.path, [error_finding(job.path, str(exc), exc.line, exc.col)])
    try:
        return process_text(job, original)
    except Exception as exc:  # a bug in a rule costs one file, not the run
        return internal_error(job.path, exc, original.text)


def process_text(job: Job, original: sourcefile.SourceFile, stdin: bool = False) -> FileReport:
    text = original.text
    if job.add_noqa:
        return _add_noqa(job, original, lint_source(text, job.path, job.settings))
    if not job.fix:
        # The cache was asked before (``cached_report``): here only the answer is kept,
        # unless it depends on local modules the file imports (an entry names one file).
        with project.recording() as imported:
            findings = lint_source(text, job.path, job.settings)
        report = FileReport(job.path, findings, source=text)
        specs = _with_imports(job, report, text)
        fingerprint = original.fingerprint
        if job.cache_dir and not stdin and fingerprint is not None and not imported:
            entry = cache.file_stamp(job.path, fingerprint.size, fingerprint.mtime_ns, fingerprint.sha256, specs)
            cache.Cache(Path(job.cache_dir)).put(cache.entry_key(job.settings, job.path), entry, findings)
        return report
    from xlalint.engine.fixing import fix_source

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
    _with_imports(job, report, text)
    return report


def _with_imports(job: Job, report: FileReport, text: str) -> tuple[project.ImportSpec, ...] | None:
    """When the run follows imports: put the local modules the file imports in the
    report (found here, in the worker that has the text: the main process reads
    nothing) and give what the file imports (None otherwise), for the cache."""
    if not job.follow:
        return None
    # The check parsed the text just before (when it mentions the scope at all).
    specs = tuple(project.import_specs(text, job.path, parsed_tree(text)))
    report.imports = resolved_imports(job, specs)
    return specs


def resolved_imports(job: Job, specs: Sequence[project.ImportSpec]) -> list[str]:
    """The files of the local modules ``specs`` (what ``job``'s file imports) name."""
    found = project.resolve_imports(list(specs), job.path, job.follow_from, job.settings.root)
    return [str(path) for path in found]


def _add_noqa(job: Job, original: sourcefile.SourceFile, findings: list[Finding]) -> FileReport:
    from xlalint.engine.noqa import add_noqa

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
        info = os.stat(job.path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None

    def read() -> tuple[bytes, str]:
        _, data = sourcefile.read_file(Path(job.path))
        return data, sourcefile.decode(data, job.path).text

    key = cache.entry_key(job.settings, job.path)
    try:
        found = cache.Cache(Path(job.cache_dir)).get(key, job.path, info, read)
    except sourcefile.SourceError:
        return None
    if found is None:
        return None
    findings, text, stamp = found
    report = FileReport(job.path, findings, source=text)
    if job.follow and stamp.imports is not None:
        # What the file imports is kept with its findings: resolved again (the modules
        # may have come or gone), nothing read.
        report.imports = resolved_imports(job, stamp.imports)
    return report


def process_all(jobs: Sequence[Job], *, continuing: bool = False) -> list[FileReport]:
    """The reports of ``jobs``, in order; ``continuing``: more files of the same run
    (the modules following imports adds), whose writes count with the run's."""
    if not continuing:
        stopping.GATE.open()
    writing = {Path(os.path.realpath(job.path)).parent for job in jobs if job.fix and job.write}
    if writing:
        sourcefile.remove_stale_temps(sorted(writing))
    # Cached files first, here: a warm rerun then starts no process pool.
    reports: list[FileReport | None] = [cached_report(job) for job in jobs]
    pending = [job for job, report in zip(jobs, reports) if report is None]
    cores = available_cores()
    try:
        if len(pending) < PARALLEL_THRESHOLD or cores < 2:
            done = [process(job) for job in pending]
        else:
            done = _in_pool(pending, cores)
    except stopping.Interrupted as stop:
        stop.written = stopping.GATE.close()  # first: from here on nothing is written
        stopping.stop_workers()
        raise
    computed = iter(done)
    return [report if report is not None else next(computed) for report in reports]


def available_cores() -> int:
    """The cores this process may run on (``taskset``, a container's CPU set), as ruff
    counts them: more workers than that only share the same cores."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _process_chunk(jobs: Sequence[Job]) -> list[FileReport]:
    return [process(job) for job in jobs]


def _in_pool(jobs: Sequence[Job], cores: int) -> list[FileReport]:
    from concurrent.futures import ProcessPoolExecutor  # only when there is work to share

    pool = ProcessPoolExecutor(max_workers=cores, initializer=stopping.worker_init, initargs=stopping.GATE.share())
    try:
        # Chunks submitted one by one rather than pool.map, whose iterator cancels the
        # pending futures when interrupted, which the pool then fails to mark broken.
        size = max(1, len(jobs) // (4 * cores))
        chunks = [pool.submit(_process_chunk, jobs[i : i + size]) for i in range(0, len(jobs), size)]
        results = [report for chunk in chunks for report in chunk.result()]
    except stopping.Interrupted:
        stopping.GATE.close()  # before anything that would wait for the workers' files
        stopping.stop_workers()
        # Not cancel_futures: the pool, seeing its workers gone, fails the pending ones itself.
        pool.shutdown(wait=False)
        raise
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results
