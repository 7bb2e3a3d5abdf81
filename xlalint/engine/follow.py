"""Following the program: `check train.py` also checks the local modules ``train.py``
imports (``mingpt/trainer.py``, where the training loop lives), and `fix` fixes them,
with the same safety as the files named.

The modules are found as ``python train.py`` finds them (``linter/project.py``: the
script's folder, the project root and its ``src/``; never site-packages), in rounds: the
files of the run say what they import (the workers find it while they check them), the
modules not yet in the run are checked next, and so on, at most ``MAX_DEPTH`` imports
away and ``MAX_ADDED`` files in all. A module is added as a walk would find it: not when
``exclude`` (or a default exclude, or a ``.gitignore``) leaves it or a folder above it
out, and with its own settings (``per-file-ignores`` by its own path). A module that is
outside the project root (through a symbolic link) is checked, never written.

What a script's step loop iterates of an imported module (``loader =
prepare_dataloader(32)``, ``from data import prepare_dataloader``) is told to that module
(``FileReport.told``, ``Settings.iterated_by_importers``): its check, part of the program,
then knows the loader the helper returns is a training loader (XLA301 in ``data.py``).
The same facts carry what a script passes an imported function (``train_one_epoch(...,
loss_scaler)`` with ``loss_scaler = NativeScaler()``: ``"train_one_epoch(6=update)"``,
``analysis/told.py``): the loop there that calls the parameter trains (XLA103, XLA102).
A module checked before an importer told it something is checked again
(``_join_programs``); what it is told is part of its cache key.

Turned off by ``follow-imports = false`` in the config of the files named, or
``--no-follow-imports`` (what the pre-commit hooks pass: they name the changed files
only). ``--add-noqa`` and stdin never follow.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from xlalint.analysis import project
from xlalint.engine import files
from xlalint.engine import source as sourcefile
from xlalint.engine.config import Settings
from xlalint.engine.escaping import printable
from xlalint.engine.file_report import FileReport
from xlalint.engine.runner import Job, imports_torch_xla, makes_xla_program, process_all

# How many imports away from a checked file a module is still checked: the script, the
# package it imports, the module the package re-exports, what that module uses.
MAX_DEPTH = 3
# At most this many modules are added to a run: a script that imports a whole framework
# of its project is checked in bounded time (a warning says when the cap was hit).
MAX_ADDED = 200


@dataclasses.dataclass
class Followed:
    """The reports of the modules added to a run, and whether ``MAX_ADDED`` stopped it."""

    reports: list[FileReport]
    capped: bool = False


def follow_imports(jobs: list[Job], reports: list[FileReport], settings_for: Callable[[Path], Settings]) -> Followed:
    """Check (and fix, as the jobs do) the local modules that the files of ``jobs``
    (whose reports are ``reports``) import, transitively; ``settings_for`` gives the
    settings of a file, as for the files named."""
    _join_programs(jobs, reports)
    in_run = {os.path.realpath(job.path) for job in jobs}
    frontier = [(job, report) for job, report in zip(jobs, reports) if job.follow]
    added: list[FileReport] = []
    added_jobs: list[Job] = []
    ignore = files.IgnoreRules()
    capped = False
    for depth in range(1, MAX_DEPTH + 1):
        new_jobs: list[Job] = []
        reasons: dict[int, str] = {}
        # What this round's XLA programs tell the modules they import, from all of them.
        told: dict[str, set[str]] = {}
        for job, report in frontier:
            if job.settings.xla_program or _xla_program(job, report):
                for real, names in (report.told or {}).items():
                    told.setdefault(real, set()).update(names)
        for job, report in frontier:
            for found in _imports(job, report):
                real = os.path.realpath(found)
                if real in in_run:
                    continue
                in_run.add(real)
                if len(added) + len(new_jobs) >= MAX_ADDED:
                    capped = True
                    break
                path = _display(found)
                settings = settings_for(path)
                if job.settings.xla_program or _xla_program(job, report):
                    settings = in_program(settings, tuple(sorted(told.get(real, ()))))
                program = job.follow_from or job.path
                if _left_out(path, settings, ignore, program):
                    continue
                reason = _not_writable(path, settings, program) if job.fix and job.write else None
                if reason is not None:
                    reasons[len(new_jobs)] = reason
                new_jobs.append(
                    dataclasses.replace(
                        job,
                        path=str(path),
                        settings=settings,
                        fix=job.fix and reason is None,
                        follow=depth < MAX_DEPTH,
                        follow_from=program,
                    )
                )
        if not new_jobs:
            break
        new_reports = process_all(new_jobs, continuing=True)
        for index, reason in reasons.items():
            new_reports[index].not_written = reason
        for report in new_reports:
            report.followed = True
        added += new_reports
        added_jobs += new_jobs
        frontier = list(zip(new_jobs, new_reports))
    if added:
        # A module found in one round may be told something by a module found later
        # (``trainer.py`` iterates what ``data.py`` returns, both imported by the script).
        every_job, every_report = jobs + added_jobs, reports + added
        _join_programs(every_job, every_report)
        jobs[:], reports[:] = every_job[: len(jobs)], every_report[: len(jobs)]
        added = every_report[len(jobs) :]
    return Followed(added, capped)


def program_modules(script: Path, settings_for: Callable[[Path], Settings]) -> list[Path]:
    """The local modules that following imports from ``script`` reaches, without
    checking them (`xlalint run` fixes copies of them): the same rounds as
    :func:`follow_imports` (``MAX_DEPTH`` imports away, ``MAX_ADDED`` in all, what a walk
    leaves out left out), each module read here to find what it imports. Paths as found,
    breadth first."""
    program = str(script)
    in_run = {os.path.realpath(script)}
    frontier = [(program, settings_for(script))]
    added: list[Path] = []
    ignore = files.IgnoreRules()
    for _depth in range(MAX_DEPTH):
        next_frontier: list[tuple[str, Settings]] = []
        for path, settings in frontier:
            try:
                text = _read(path)
            except (OSError, sourcefile.SourceError):
                continue
            for found in project.local_imports(text, path, program, settings.root):
                real = os.path.realpath(found)
                if real in in_run or len(added) >= MAX_ADDED:
                    continue
                in_run.add(real)
                shown = _display(str(found))
                module_settings = settings_for(shown)
                if _left_out(shown, module_settings, ignore, program):
                    continue
                added.append(shown)
                next_frontier.append((str(shown), module_settings))
        frontier = next_frontier
    return added


def checked_too(count: int) -> str:
    """The summary line of the text formats: how many modules following imports added."""
    return f"{count} imported local module{'s' if count != 1 else ''} checked too"


def cap_warning(followed: Followed) -> str | None:
    """What to say when ``MAX_ADDED`` stopped the following (else None)."""
    if not followed.capped:
        return None
    return f"following imports stopped at {MAX_ADDED} modules: the others imported are not checked"


def _join_programs(jobs: list[Job], reports: list[FileReport]) -> None:
    """The files of the run that an XLA program of the run imports (``fix .`` of a project
    whose ``train.py`` imports ``model.py``) are part of that program, and told what its
    modules say of them (``FileReport.told``: ``loader = prepare_dataloader(32)`` in
    ``train.py``'s step loop tells ``data.py`` that ``prepare_dataloader``'s result is
    iterated): those first checked without knowing it are checked again as part of it, in
    place in ``jobs`` and ``reports``. Computed once per round from every report, linear
    in files and imports; a module checked again may tell the modules it imports more (a
    helper returning another module's loader), so at most ``MAX_DEPTH`` more rounds. A
    file a first pass already fixed on disk keeps those fixes in its report."""
    where = {os.path.realpath(job.path): index for index, job in enumerate(jobs)}
    for _round in range(MAX_DEPTH + 1):
        roots = [i for i, (job, report) in enumerate(zip(jobs, reports)) if job.follow and _xla_program(job, report)]
        pending, reached, imported = list(roots), set(roots), set()
        while pending:
            index = pending.pop()
            for found in _imports(jobs[index], reports[index]) if jobs[index].follow else ():
                other = where.get(os.path.realpath(found))
                if other is not None:
                    imported.add(other)
                    if other not in reached:
                        reached.add(other)
                        pending.append(other)
        told = told_in_program([reports[i] for i in sorted(reached)], where)
        again = []
        for index in sorted(reached):
            settings = jobs[index].settings
            names = told.get(index, ())
            if settings.iterated_by_importers != names or (index in imported and not settings.xla_program):
                xla_program = settings.xla_program or index in imported
                again.append((index, in_program(settings, names, xla_program)))
        if not again:
            return
        _check_again(jobs, reports, again)


def told_in_program(reports: list[FileReport], where: dict[str, int]) -> dict[int, tuple[str, ...]]:
    """What the modules of a program (their ``reports``) tell the files of the run
    (``where``: real path -> index): index -> the functions of that file whose results
    a step loop of the program iterates, sorted."""
    told: dict[int, set[str]] = {}
    for report in reports:
        for real, names in (report.told or {}).items():
            other = where.get(real)
            if other is not None:
                told.setdefault(other, set()).update(names)
    return {index: tuple(sorted(names)) for index, names in told.items()}


def in_program(settings: Settings, iterated: tuple[str, ...], xla_program: bool = True) -> Settings:
    """The settings of a module checked as part of a program: ``xla_program`` (an XLA
    script imports it) and the functions of it whose results that program's step loops
    iterate (sorted; ``told_in_program``, ``FileReport.told``). The engine API the
    language server checks a module with, once it knows what the open scripts tell it."""
    return dataclasses.replace(settings, xla_program=xla_program, iterated_by_importers=iterated)


def told_by(source: str, path: str, settings: Settings, script: str | None = None) -> dict[str, tuple[str, ...]]:
    """What the module ``source`` (at ``path``, part of the program ``script``: itself
    when None) tells the local modules it imports, as ``FileReport.told``: module (real
    path) -> its functions whose results a step loop of ``source`` iterates. With
    :func:`in_program`, the engine API for a caller that checks one module at a time (the
    language server; :func:`program_settings` does both): the union of what the
    program's scripts tell a module, passed to ``in_program``, gives the settings to
    check it with (``lint_source``)."""
    from xlalint.engine.lint import iterated_imports  # here: a warm check lints nothing

    specs = iterated_imports(source, path, settings)
    return project.resolve_functions(specs, path, script, settings.root)


def program_told(
    scripts: Iterable[str],
    members: Iterable[str],
    tells: Callable[[str, tuple[str, ...] | None], dict[str, tuple[str, ...]]],
) -> dict[str, tuple[str, ...]]:
    """What a program's files tell its ``members`` (real paths; the modules its XLA
    ``scripts`` import), for a caller that checks one module at a time: the union of what
    the step loops of the scripts and of the members iterate of each member's functions,
    sorted. ``tells(real, told)``: what the file ``real`` tells the modules it imports
    (``told_by``), as a script (``told`` None) or as a member told ``told``. A member
    told something may tell the modules it imports more (a helper returning another
    module's loader): again until nothing changes, at most ``MAX_DEPTH`` more times (as
    ``_join_programs`` for a run)."""
    members = set(members)
    files = {*scripts, *members}
    told: dict[str, tuple[str, ...]] = dict.fromkeys(members, ())
    for _round in range(MAX_DEPTH + 2):
        now: dict[str, set[str]] = {real: set() for real in members}
        for real in files:
            for module, names in tells(real, told.get(real)).items():
                if module in now:
                    now[module].update(names)
        found = {real: tuple(sorted(names)) for real, names in now.items()}
        if found == told:
            break
        told = found
    return told


def program_settings(path: str, settings: Settings, importers: Iterable[tuple[str, str]]) -> Settings:
    """The settings to check the module at ``path`` with (``lint_source``) as part of the
    programs of ``importers``: the ``(path, text)`` of files that may import it (open
    documents, saved or not). Those that import torch_xla and import the module make it
    part of an XLA program and tell it what their step loops iterate of its functions
    (``program_told`` over ``told_by``). The language server finds a module's programs
    from its workspace folder (``server_program.py``, the same ``program_told``)."""
    real = os.path.realpath(path)
    texts = {os.path.realpath(importer): (importer, text) for importer, text in importers}
    scripts = [
        other
        for other, (importer, text) in texts.items()
        if other != real
        and imports_torch_xla(text)
        and real in {os.path.realpath(found) for found in project.local_imports(text, importer, None, settings.root)}
    ]

    def tells(file: str, told: tuple[str, ...] | None) -> dict[str, tuple[str, ...]]:
        if file not in texts:
            return {}
        importer, text = texts[file]
        return told_by(text, importer, settings if told is None else in_program(settings, told))

    xla_program = settings.xla_program or bool(scripts)
    names = tuple(sorted({*settings.iterated_by_importers, *program_told(scripts, [real], tells)[real]}))
    if xla_program == settings.xla_program and names == settings.iterated_by_importers:
        return settings
    return in_program(settings, names, xla_program)


def _check_again(jobs: list[Job], reports: list[FileReport], again: list[tuple[int, Settings]]) -> None:
    """Check (or fix) the files at the indexes of ``again`` again with the settings
    given, in place; a first pass's fixes written on disk stay in the report."""
    rerun = [dataclasses.replace(jobs[i], settings=settings) for i, settings in again]
    indexes = [i for i, _ in again]
    for index, job, report in zip(indexes, rerun, process_all(rerun, continuing=True), strict=True):
        first = reports[index]
        if job.fix and job.write and first.fixed:
            report.fixed = first.fixed + report.fixed
            report.source, report.checked = first.source, first.checked
        report.not_written = first.not_written
        report.followed = first.followed
        jobs[index], reports[index] = job, report


def _xla_program(job: Job, report: FileReport) -> bool:
    """The module of ``job`` makes its program an XLA one (``runner.makes_xla_program``):
    found by the worker that checked it (or kept in its cache entry), else read here."""
    if report.xla_program is not None:
        return report.xla_program
    if report.source is None and not (job.path.endswith(".ipynb") or report.unreadable):
        try:
            report = dataclasses.replace(report, source=_read(job.path))
        except (OSError, sourcefile.SourceError):
            return False
    return makes_xla_program(report)


def _imports(job: Job, report: FileReport) -> list[str]:
    """What the file imports: found by the worker that checked it, or, for a report
    answered from the cache (or a notebook), read here."""
    if report.imports is not None:
        return report.imports
    if job.path.endswith(".ipynb") or report.unreadable:
        return []
    try:
        text = report.source if report.source is not None else _read(job.path)
    except (OSError, sourcefile.SourceError):
        return []
    return [str(p) for p in project.local_imports(text, job.path, job.follow_from, job.settings.root)]


def _read(path: str) -> str:
    return sourcefile.read(Path(path)).text


def _display(found: str) -> Path:
    """A module's path as a user reads it: relative to the current folder when it is
    below it (as the files of a walk are shown), else absolute. Links not resolved."""
    absolute = Path(os.path.abspath(found))
    try:
        return absolute.relative_to(Path.cwd())
    except ValueError:
        return absolute


def _left_out(path: Path, settings: Settings, ignore: files.IgnoreRules, program: str) -> bool:
    """What a walk of the project would leave out: an excluded file or folder (the
    config's `exclude`, the default excludes), or one a .gitignore ignores."""
    absolute = Path(os.path.abspath(path))
    top = _project_area(program, settings)
    return files.walk_leaves_out(absolute, settings, ignore, top)


def _project_area(program: str, settings: Settings) -> Path:
    script = Path(os.path.realpath(program))
    return project.project_root(script, settings.root) or script.parent


def _not_writable(path: Path, settings: Settings, program: str) -> str | None:
    """Why `fix` must not write this module, or None: a link on the way leads out of
    the project (as for the files named), or its real path is outside the project root."""
    target = files.linked_outside(path, settings)
    if target is None:
        real = Path(os.path.realpath(path))
        target = None if real.is_relative_to(_project_area(program, settings)) else real
    return None if target is None else f"a link to a file outside the project ({printable(str(target))})"
