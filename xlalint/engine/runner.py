"""Checking and fixing many files: per-file settings, a result cache, and a process
pool when there are enough files to pay for it."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xlalint.analysis import project
from xlalint.engine import cache, collector, memory, stopping
from xlalint.engine import source as sourcefile
from xlalint.engine.config import Settings
from xlalint.engine.file_report import FileReport, internal_error
from xlalint.model import error_finding

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
        from xlalint.engine.notebook import process_notebook  # here: most checks have no notebook

        return process_notebook(job)
    try:
        original = sourcefile.read(path)
    except sourcefile.SourceError as exc:
        return FileReport(job.path, [error_finding(job.path, str(exc), exc.line, exc.col)])
    # The cyclic collector waits until the file is done, then collects what the check
    # left (the tree and the analyses over it, which hold cycles) at once, while it is
    # young. Left to its thresholds it ran while the tree was still held (for the
    # imports read after the check) and traversed it again as it aged: a sixth of a cold
    # check's time.
    from xlalint.engine.lint import forget_parsed  # here: a warm check reads only the cache

    collecting = gc.isenabled()
    gc.disable()
    try:
        return process_text(job, original)
    except Exception as exc:  # a bug in a rule costs one file, not the run
        return internal_error(job.path, exc, original.text)
    finally:
        forget_parsed()
        if collecting:
            gc.enable()
            gc.collect(0)


def process_text(job: Job, original: sourcefile.SourceFile, stdin: bool = False) -> FileReport:
    from xlalint.engine.lint import lint_source

    text = original.text
    if job.add_noqa:
        return _add_noqa(job, original)
    if not job.fix:
        # The cache was asked before (``cached_report``): here only the answer is kept,
        # unless it depends on local modules the file imports (an entry names one file).
        with project.recording() as imported, _exporting(job) as exports:
            findings = lint_source(text, job.path, job.settings)
        report = FileReport(job.path, findings, source=text)
        specs = _with_imports(job, report, text)
        told = _with_told(job, report, text, exports)
        fingerprint = original.fingerprint
        if job.cache_dir and not stdin and fingerprint is not None and not imported:
            entry = cache.file_stamp(
                job.path, fingerprint.size, fingerprint.mtime_ns, fingerprint.sha256, specs, report.xla_program, told
            )
            cache.Cache(Path(job.cache_dir)).put(cache.entry_key(job.settings, job.path), entry, findings)
        return report
    from xlalint.engine.fixing import fix_source

    with _exporting(job) as exports:
        result = fix_source(text, job.path, job.settings, unsafe=job.unsafe)
    report = FileReport(job.path, result.remaining, result.applied, text, result.source, result.error)
    report.checked = result.checked
    if job.write and not stdin and report.changed:
        try:
            sourcefile.write_atomic(Path(job.path), original, result.source)
        except (sourcefile.SourceError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            report.error = f"not written: {reason}"
            report.findings = lint_source(text, job.path, job.settings)
            report.fixed, report.fixed_source = [], text
    _with_imports(job, report, text)
    _with_told(job, report, report.fixed_source if report.fixed_source is not None else text, exports)
    return report


def _exporting(job: Job) -> contextlib.AbstractContextManager[list | None]:
    """Record what the file tells the modules it imports, when the run follows imports."""
    if not job.follow:
        return contextlib.nullcontext()
    from xlalint.engine.lint import recording_exports  # here: a warm check lints nothing

    return recording_exports()


def _with_told(
    job: Job, report: FileReport, text: str, exports: list | None
) -> tuple[project.FunctionSpec, ...] | None:
    """When the run follows imports: put in the report what the file (as ``text``, the
    program that runs) tells the local modules it imports (``report.told``) and give it
    as the names it uses (None otherwise), for the cache. The check of ``text`` recorded
    it (``exports``); a fixed text, or one the check did not analyse (a package's
    ``__init__.py`` told of a function it re-exports), is analysed here."""
    if exports is None or not job.follow:
        return None
    if exports[0] is text and exports[1] is not None:
        specs = exports[1]
    elif exports[0] is text and not job.settings.iterated_by_importers:
        specs = []  # not analysed: it has no step loop, and was told nothing to tell on
    else:
        from xlalint.engine.lint import iterated_imports

        specs = iterated_imports(text, job.path, job.settings)
    report.told = project.resolve_functions(specs, job.path, job.follow_from, job.settings.root)
    return tuple(specs)


def _with_imports(job: Job, report: FileReport, text: str) -> tuple[project.ImportSpec, ...] | None:
    """When the run follows imports: put the local modules the file imports in the
    report (found here, in the worker that has the text: the main process reads
    nothing) and give what the file imports (None otherwise), for the cache."""
    if not job.follow:
        return None
    from xlalint.engine.lint import parsed_tree

    # The check parsed the text just before (when it mentions the scope at all).
    specs = tuple(project.import_specs(text, job.path, parsed_tree(text)))
    report.imports = resolved_imports(job, specs)
    report.xla_program = makes_xla_program(report)
    return specs


# An import of torch_xla at the start of a line.
_IMPORTS_TORCH_XLA = re.compile(r"^[ \t]*(?:import|from)[ \t]+torch_xla\b", re.MULTILINE)


def makes_xla_program(report: FileReport) -> bool:
    """The file of ``report`` makes its program an XLA one: it imports torch_xla (as
    checked, or as fixed), or a fix of it adds the import (``check`` of a CUDA script that
    the port makes an XLA one). The local modules it imports then run in an XLA program."""
    for finding in report.findings:
        if finding.fix is not None and any(imp.module.split(".")[0] == "torch_xla" for imp in finding.fix.imports):
            return True
    text = report.fixed_source if report.fixed_source is not None else report.source
    return text is not None and imports_torch_xla(text)


def imports_torch_xla(text: str) -> bool:
    """A line of ``text`` imports torch_xla."""
    # The substring first: a search for the line costs a twentieth of the file's check.
    return "torch_xla" in text and _IMPORTS_TORCH_XLA.search(text) is not None


def resolved_imports(job: Job, specs: Sequence[project.ImportSpec]) -> list[str]:
    """The files of the local modules ``specs`` (what ``job``'s file imports) name."""
    found = project.resolve_imports(list(specs), job.path, job.follow_from, job.settings.root)
    return [str(path) for path in found]


def _add_noqa(job: Job, original: sourcefile.SourceFile) -> FileReport:
    from xlalint.engine.lint import lint_source
    from xlalint.engine.noqa import add_noqa_until_clean

    new, findings, count = add_noqa_until_clean(original.text, lambda text: lint_source(text, job.path, job.settings))
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
        report.xla_program = stamp.xla_program
        if stamp.iterated is not None:
            report.told = project.resolve_functions(list(stamp.iterated), job.path, job.follow_from, job.settings.root)
    return report


def process_all(jobs: Sequence[Job], *, continuing: bool = False) -> list[FileReport]:
    """The reports of ``jobs``, in order; ``continuing``: more files of the same run
    (the modules following imports adds), whose writes count with the run's."""
    if not continuing:
        stopping.GATE.open()
    writing = {Path(os.path.realpath(job.path)).parent for job in jobs if job.fix and job.write}
    if writing:
        sourcefile.remove_stale_temps(sorted(writing))
    collector.settle()
    # Cached files first, here: a warm rerun then starts no process pool.
    with project.one_run():
        reports: list[FileReport | None] = [cached_report(job) for job in jobs]
    pending = [job for job, report in zip(jobs, reports) if report is None]
    if pending:
        _import_checking(pending[0])
        collector.settle()
    cores = available_cores()
    if len(pending) >= PARALLEL_THRESHOLD and cores >= 2:
        # No more workers than the memory budget holds, each with the largest file.
        cores = memory.workers(cores, _largest(pending), fix=any(job.fix for job in pending))
    try:
        if len(pending) < PARALLEL_THRESHOLD or cores < 2:
            with project.one_run():
                done = [process(job) for job in pending]
        else:
            done = _in_pool(pending, cores)
    except stopping.Interrupted as stop:
        stop.written = stopping.GATE.close()  # first: from here on nothing is written
        stopping.stop_workers()
        raise
    computed = iter(done)
    return [report if report is not None else next(computed) for report in reports]


def _import_checking(job: Job) -> None:
    """Import what checking ``job`` runs (the walk, its rules), before the files are:
    what a pool's workers find imported when they fork, and what ``collector.settle``
    keeps out of the collector's way."""
    from xlalint.engine import lint
    from xlalint.rules import rules_by_code

    lint.selected_rules(job.settings, job.path)
    rules_by_code()[lint.PORT_CODE]  # it runs on every file that does not import torch_xla


def _largest(jobs: Sequence[Job]) -> int:
    """The size in bytes of the largest file of ``jobs`` (what a worker may have to hold)."""
    largest = 0
    for job in jobs:
        try:
            largest = max(largest, os.stat(job.path).st_size)
        except OSError:
            continue
    return largest


def available_cores() -> int:
    """The cores this process may run on (``taskset``, a container's CPU set), as ruff
    counts them: more workers than that only share the same cores."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _process_chunk(jobs: Sequence[Job]) -> list[FileReport]:
    with project.one_run():
        return [process(job) for job in jobs]


def _in_pool(jobs: Sequence[Job], cores: int) -> list[FileReport]:
    from concurrent.futures import ProcessPoolExecutor  # only when there is work to share

    # What every worker runs, imported once here, before they fork from this process.
    from xlalint.engine import lint  # noqa: F401
    from xlalint.rules import all_rules

    all_rules()
    collector.settle()
    pool = ProcessPoolExecutor(max_workers=cores, initializer=stopping.worker_init, initargs=stopping.GATE.share())
    try:
        # Chunks submitted one by one rather than pool.map, whose iterator cancels the
        # pending futures when interrupted, which the pool then fails to mark broken.
        # Small chunks, taken by whichever worker is free: the last ones end together
        # (with four chunks a worker, one of large files kept the other core idle).
        size = max(1, len(jobs) // (16 * cores))
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
