"""A run of ``check`` or ``fix`` once the command line is parsed: the settings it asks
for, the files, the reports, what is printed and the exit status.

Nothing here imports typer (or click): ``cli.main`` runs a plain ``check`` (the one-file
check pre-commit runs on every commit) without building the typer app, whose import
and command tree cost a quarter of that check; ``cli_app.py`` has the parser, the help,
and the commands that call :func:`run`. An exit status is a ``SystemExit``, which both
pass on as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import Enum
from pathlib import Path

from xlalint.engine import collector, reporters, stopping, text_report
from xlalint.engine import source as sourcefile
from xlalint.engine.config import (
    ConfigError,
    ConfigFinder,
    Settings,
    command_line_config,
    parse_target_runtime,
    parse_target_version,
    validate_selectors,
)
from xlalint.engine.escaping import printable
from xlalint.engine.runner import FileReport, Job, internal_error, process_all, process_text
from xlalint.engine.runtimes import active_codes
from xlalint.engine.text_report import use_color
from xlalint.output import USAGE_EXIT, echo, error_line

# The choices of --output-format: the formats the reporters have (`json-lines` is the
# member `json_lines`), named once, in ``reporters.FORMATS``.
OutputFormat = Enum(  # type: ignore[misc]
    "OutputFormat", {name.replace("-", "_"): name for name in reporters.FORMATS}, type=str
)


def fail(message: str) -> SystemExit:
    """A user error (bad option, unknown code, bad config): one line, exit status 2, in
    the style usage errors have too (``help_format``)."""
    echo(error_line(message), err=True)
    return SystemExit(USAGE_EXIT)


def patterns(values: list[str] | None) -> tuple[str, ...]:
    return tuple(p.strip() for value in values or () for p in value.split(",") if p.strip())


def codes(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(code.strip().upper() for value in values for code in value.split(","))


class Invocation:
    """What one check/fix run was asked to do."""

    def __init__(
        self,
        *,
        select,
        ignore,
        extend_select,
        target_version,
        config: Path | None,
        need_rules=True,
        unsafe_fixes: bool | None = None,
        extend_exclude: list[str] | None = None,
        exclude: list[str] | None = None,
        isolated: bool = False,
        target_runtime: str | None = None,
    ):
        self.need_rules = need_rules
        self.overrides = {
            "unsafe_fixes": unsafe_fixes,
            "extend_exclude": patterns(extend_exclude),
            "exclude": patterns(exclude),
            "cwd": str(Path.cwd()),
            # `--select ''` selects nothing, as `select = []` does: the same one message.
            "select": () if select and not any(value.strip() for value in select) else codes(select),
            "ignore": codes(ignore),
            "extend_select": codes(extend_select),
            "target_version": parse_target_version(target_version, "--target-version") if target_version else None,
            "target_runtime": parse_target_runtime(target_runtime, "--target-runtime") if target_runtime else None,
        }
        from xlalint.rules import rules_by_code

        known = rules_by_code()
        for key in ("select", "ignore", "extend_select"):
            if self.overrides[key]:
                validate_selectors(self.overrides[key], known, f"--{key.replace('_', '-')}")
        self.known = known
        config_file, inline = command_line_config(config)
        self.finder = ConfigFinder(config_file, known, inline=inline, isolated=isolated)
        self._with_overrides: dict[int, tuple[Settings, Settings]] = {}

    def unsafe_fixes(self) -> bool | None:
        """Whether unsafe fixes are applied (True), hinted at (None) or neither (False):
        the command line's flag, else the config's ``unsafe-fixes`` where the command
        runs (a run-wide setting, as in ruff)."""
        if self.overrides["unsafe_fixes"] is not None:
            return self.overrides["unsafe_fixes"]
        return self.finder.for_path(Path.cwd()).unsafe_fixes

    def settings(self, path: Path) -> Settings:
        found = self.finder.for_path(path.absolute())
        # One object per config file: the cache keys jobs that share it at the cost of one.
        if id(found) not in self._with_overrides:
            settings = found.with_overrides(**self.overrides)
            if self.need_rules and not active_codes(settings, self.known):
                raise ConfigError(no_rule_selected(settings))
            self._with_overrides[id(found)] = (found, settings)
        return self._with_overrides[id(found)][1]

    def for_path(self, path: Path) -> Settings:
        """As ``ConfigFinder.for_path``, with the command line on top: the walk then
        honours ``--extend-exclude`` as it does the config's excludes."""
        return self.settings(path)


def no_rule_selected(settings: Settings) -> str:
    """One message for a selection that enables no rule, wherever it was made: a check
    of nothing must not pass as "All checks passed!" (CI would pass unchecked)."""
    where = [settings.source] if settings.source else []
    if settings.overrides:
        where.append("the command line")
    return f"no rule selected (by {' and '.join(where) or 'the settings'}): select `ALL` for every rule"


def run(
    paths: list[str] | None,
    *,
    fix: bool,
    unsafe: bool | None,
    diff: bool,
    select,
    ignore,
    extend_select,
    output_format: OutputFormat | None,
    statistics: bool,
    exit_zero: bool,
    show_fixes: bool,
    stdin_filename: str | None,
    target_version: str | None,
    config: list[str] | None,
    no_cache: bool,
    quiet: bool,
    force_exclude: bool,
    add_noqa: bool = False,
    extend_exclude: list[str] | None = None,
    show_files: bool = False,
    exit_non_zero_on_fix: bool = False,
    follow_imports: bool | None = None,
    exclude: list[str] | None = None,
    output_file: Path | None = None,
    isolated: bool = False,
    watch: bool = False,
    target_runtime: str | None = None,
) -> None:
    arguments = dict(locals())
    if watch:
        _watch({**arguments, "watch": False})
        return
    if output_file is not None:
        _to_output_file(output_file, {**arguments, "output_file": None})
        return
    paths = paths or []
    use_stdin = paths == ["-"] or (stdin_filename is not None and not paths)
    try:
        invocation = Invocation(
            select=select,
            ignore=ignore,
            extend_select=extend_select,
            target_version=target_version,
            config=config,
            unsafe_fixes=unsafe,
            extend_exclude=extend_exclude,
            exclude=exclude,
            isolated=isolated,
            target_runtime=target_runtime,
        )
        # Unsafe fixes: applied (True), hinted at (None, the default) or neither (False).
        unsafe_setting = invocation.unsafe_fixes()
        unsafe = bool(unsafe_setting)
        if show_files:
            _show_files(invocation, paths or ["."], force_exclude)
            return
        if "-" in paths and not use_stdin:
            raise ConfigError("`-` (stdin) cannot be combined with other paths")
        if add_noqa and (use_stdin or fix or diff):
            raise ConfigError("--add-noqa writes the files it is given: not with stdin, --fix or --diff")
        if use_stdin:
            stdin_report, stdin_output = _stdin_report(
                invocation, stdin_filename, fix=fix, unsafe=unsafe, force_exclude=force_exclude
            )
            reports = [stdin_report]
        else:
            with stopping.stop_on_signals():
                reports = _file_reports(
                    invocation,
                    paths or ["."],
                    fix=fix,
                    unsafe=unsafe,
                    write=not diff,
                    no_cache=no_cache,
                    force_exclude=force_exclude,
                    add_noqa=add_noqa,
                    follow_imports=follow_imports,
                )
    except ConfigError as exc:
        if use_stdin and fix and not diff:
            _give_back_stdin(b"")
        raise fail(str(exc)) from None
    except sourcefile.InputTooLarge as exc:
        if fix and not diff:
            _give_back_stdin(exc.head)
        raise fail(f"stdin: {exc}") from None
    except stopping.Interrupted as stop:
        # Stopped at once: the gate is closed (nothing more is written), workers are gone.
        stop.written = stopping.GATE.close()
        echo(stop.message(), err=True)
        # Leave now: the interpreter's exit handlers would wake the process pool's manager
        # thread through a pipe the killed workers' pool has closed, and print a traceback.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(stop.exit_code)
    _warn_malformed_noqa(reports)
    if add_noqa:
        _report_add_noqa(reports)
        return

    # As ruff: a walk that found nothing says so (on stderr) rather than "All checks passed!".
    nothing_found = not use_stdin and not reports
    if nothing_found:
        echo("warning: No Python files found under the given path(s)", err=True)
    findings = sorted((f for r in reports for f in r.findings), key=lambda f: f.sort_key())
    fixed = [f for r in reports for f in r.fixed]
    out = sys.stdout
    if use_stdin and fix and not diff:
        # As ruff: the fixed source goes to stdout (as bytes, in the input's encoding;
        # the input itself whenever it is not fixed), the findings to stderr.
        sys.stdout.flush()
        sys.stdout.buffer.write(stdin_output)
        sys.stdout.buffer.flush()
        out = sys.stderr
    fmt = output_format.value if output_format is not None else "full" if _is_terminal(out) else "concise"

    def summary_text() -> str:
        text = reporters.summary(
            findings,
            unsafe,
            fixed=len(fixed),
            command="fix" if fix else "check",
            after_port=sum(f.after_port for f in fixed),
            hint_unsafe=unsafe_setting is None,
            checked=reporters.checked_count(reports) if fix else None,
        )
        return text_report.paint_summary(text, use_color(out))

    if diff:
        from xlalint.engine.fix_output import print_diffs  # here: a check prints no fixes

        print_diffs(reports, out, quiet=quiet, unsafe=unsafe)
    elif statistics:
        print(reporters.statistics(findings, unsafe, as_json=fmt == "json"), file=out)
        if fmt != "json" and not quiet and not nothing_found:
            # As ruff's: the counts, then the summary (`Found N errors.`, what is fixable).
            print(summary_text(), file=out)
    else:
        # Edits (and a notebook's positions in its file) are computed on the text the
        # remaining findings were found in: after a fix, that is the fixed text.
        sources = (
            {
                r.path: r.fixed_source if r.fixed_source is not None else r.source
                for r in reports
                if r.source is not None
            }
            if fmt in ("json", "json-lines", "sarif", "github", "full")
            else None
        )
        if fmt == "full":
            from xlalint.engine.full_format import render_full

            out.flush()
            render_full(findings, sources or {}, unsafe=unsafe, show_fixes=show_fixes, out=out, color=use_color(out))
            if show_fixes and fix:
                from xlalint.engine.fix_output import print_fixes

                print_fixes(reports, fixed=True, unsafe=unsafe, out=out)
        elif fmt in text_report.LINE_FORMATS:
            rendered = text_report.render(fmt, findings, unsafe, color=use_color(out))
            if rendered:
                print(rendered, file=out)
            if fmt != "pylint" and show_fixes:
                from xlalint.engine.fix_output import print_fixes

                print_fixes(reports, fixed=fix, unsafe=unsafe, out=out)
        else:
            rendered = reporters.render(fmt, findings, sources=sources, unsafe=unsafe)
            if rendered:
                print(rendered, file=out)
        if fmt in ("full", "concise", "text", "grouped") and not quiet and not nothing_found:
            print(summary_text(), file=out)
            for note in (*reporters.withheld_notes(findings), *reporters.port_notes(findings, unsafe)):
                print(note, file=out)
            followed = sum(r.followed for r in reports)
            if followed:
                from xlalint.engine.follow import checked_too

                print(checked_too(followed), file=out)
    for report in reports:
        if report.error:
            echo(f"xlalint: error: {report.path}: {report.error}", err=True)
    _warn_not_written(reports)

    if any(r.unreadable or r.error for r in reports):
        raise SystemExit(2)
    if diff:
        raise SystemExit(1 if any(r.changed for r in reports) and not exit_zero else 0)
    if findings and not exit_zero:
        raise SystemExit(1)
    if exit_non_zero_on_fix and fixed and not exit_zero:
        raise SystemExit(1)


def _to_output_file(path: Path, arguments: dict) -> None:
    """``--output-file``: the run, with what it prints on stdout written to ``path``
    (atomically, also when findings make it exit 1; not after a usage error)."""
    from xlalint.engine import output_file as report_file

    stdin = arguments["paths"] == ["-"] or (arguments["stdin_filename"] is not None and not arguments["paths"])
    if stdin and arguments["fix"] and not arguments["diff"]:
        raise fail("--output-file: `fix -` prints the fixed code on stdout; name a file to fix instead")
    captured = report_file.Capture()
    status = 0
    try:
        with contextlib.redirect_stdout(captured):
            run(**arguments)
    except SystemExit as exc:
        status = exc.code
    if status == USAGE_EXIT and not captured.getvalue():
        raise SystemExit(status)
    try:
        report_file.write(path, captured.getvalue())
    except report_file.OutputFileError as exc:
        raise fail(str(exc)) from None
    if status:
        raise SystemExit(status)


def _watch(arguments: dict) -> None:
    """``--watch``: the run, then again whenever a file it reads changes (engine/watch.py)."""
    from xlalint.engine.files import discover
    from xlalint.engine.watch import snapshot, watch

    if arguments["fix"] or arguments["paths"] == ["-"] or arguments["stdin_filename"] is not None:
        raise fail("--watch checks files: not with fixes or stdin")
    collector.one_shot(False)  # each run's leftovers must stay collectable
    paths = [Path(p) for p in arguments["paths"] or ["."]]

    def run_once() -> None:
        with contextlib.suppress(SystemExit):
            run(**arguments)
        sys.stdout.flush()

    def take_snapshot():
        try:
            invocation = Invocation(
                select=arguments["select"],
                ignore=arguments["ignore"],
                extend_select=arguments["extend_select"],
                target_version=arguments["target_version"],
                config=arguments["config"],
                need_rules=False,
                extend_exclude=arguments["extend_exclude"],
                exclude=arguments["exclude"],
                isolated=arguments["isolated"],
                target_runtime=arguments["target_runtime"],
            )
            files = list(discover(paths, invocation, force_exclude=arguments["force_exclude"], unreadable={}))
        except ConfigError:
            files = []  # the run says what is wrong with the config; a fix of it is a change
        return snapshot(files, [p if p.is_dir() else p.parent for p in paths])

    try:
        watch(run_once, take_snapshot, lambda line: echo(line, err=True))
    except KeyboardInterrupt:
        raise SystemExit(0) from None


def _show_files(invocation: Invocation, paths: list[str], force_exclude: bool) -> None:
    """As ``ruff check --show-files``: the files that would be checked, sorted, one a line."""
    from xlalint.engine.files import discover

    found = discover([Path(p) for p in paths], invocation, force_exclude=force_exclude, unreadable={})
    for path in sorted(str(p.absolute()) for p in found):
        echo(printable(path))


def _warn_malformed_noqa(reports: list[FileReport]) -> None:
    """A malformed code in a ``# noqa:`` list (``XLA1O4``) suppresses nothing: said on
    stderr, one line each, not a finding (as ruff warns)."""
    from xlalint.engine.noqa import malformed_codes, unknown_file_directives

    for report in reports:
        if report.source is None or report.path.endswith(".ipynb"):
            continue
        for line, comment in unknown_file_directives(report.source):
            echo(
                f"warning: {printable(report.path)}:{line}: unknown directive `{printable(comment)}` "
                "(the file-level ones are `# xlalint: noqa`, `# xlalint: noqa: CODES` and "
                "`# xlalint: disable-file`): it suppresses nothing",
                err=True,
            )
        for line, code in malformed_codes(report.source):
            echo(
                f"warning: {printable(report.path)}:{line}: malformed code `{printable(code)}` in `# noqa` "
                "(a code is letters then digits, e.g. `XLA104`): it suppresses nothing",
                err=True,
            )


def _warn_not_written(reports: list[FileReport]) -> None:
    for report in reports:
        if report.not_written:
            echo(f"warning: {printable(report.path)}: checked, not fixed: {report.not_written}", err=True)


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _file_reports(
    invocation: Invocation,
    paths: list[str],
    *,
    fix,
    unsafe,
    write,
    no_cache,
    force_exclude,
    add_noqa=False,
    follow_imports: bool | None = None,
) -> list[FileReport]:
    from xlalint.engine.files import discover, linked_outside
    from xlalint.model import error_finding

    cache_dir = None if no_cache or fix or add_noqa else _trusted_cache(cache_folder(invocation))
    jobs, not_written, unreadable = [], {}, {}
    found = discover([Path(p) for p in paths], invocation, force_exclude=force_exclude, unreadable=unreadable)
    for path in found:
        settings = invocation.settings(path)
        target = linked_outside(path, settings) if (fix or add_noqa) and write else None
        if target is not None:  # checked only
            not_written[len(jobs)] = f"a link to a file outside the project ({printable(str(target))})"
        fixing = target is None
        jobs.append(
            Job(
                str(path),
                settings,
                fix=fix and fixing,
                unsafe=unsafe,
                write=write,
                cache_dir=cache_dir,
                add_noqa=add_noqa and fixing,
                # `--add-noqa` edits only the files it is given.
                follow=(settings.follow_imports if follow_imports is None else follow_imports) and not add_noqa,
            )
        )
    reports = process_all(jobs)
    for index, reason in not_written.items():
        reports[index].not_written = reason
    if any(job.follow for job in jobs):
        from xlalint.engine.follow import cap_warning
        from xlalint.engine.follow import follow_imports as follow

        followed = follow(jobs, reports, invocation.settings)
        if cap_warning(followed):
            echo(f"warning: {cap_warning(followed)}", err=True)
        reports += followed.reports
    # A folder that could not be read is reported as a file that could not be (XLA000, exit 2).
    return reports + [
        FileReport(str(folder), [error_finding(str(folder), f"cannot read the folder: {reason}")])
        for folder, reason in unreadable.items()
    ]


def cache_folder(invocation: Invocation) -> Path:
    """Where ``check`` keeps its cache: at the project root of the folder it runs in (the
    config file's folder, else the git repository's root, else that folder)."""
    from xlalint.engine.cache import FOLDER_NAME, project_root

    return project_root(invocation.finder.for_path(Path.cwd()).root, Path.cwd()) / FOLDER_NAME


def _trusted_cache(folder: Path) -> str | None:
    """``folder`` unless another user owns it or may write in it (then one warning)."""
    from xlalint.engine.cache import untrusted

    reason = untrusted(folder)
    if reason is None:
        return str(folder)
    echo(f"warning: the cache folder {printable(str(folder))} {reason}: checked without it (as --no-cache)", err=True)
    return None


def _report_add_noqa(reports: list[FileReport]) -> None:
    """As ruff: how many lines got a ``# noqa``; what could not be read is still an error."""
    from xlalint.model import SYNTAX_ERROR

    errors = [f for r in reports for f in r.findings if f.code == SYNTAX_ERROR[0]]
    if errors:
        print(reporters.render("text", errors), file=sys.stdout)
    for report in reports:
        if report.error:
            echo(f"xlalint: error: {report.path}: {report.error}", err=True)
    _warn_not_written(reports)
    added = sum(r.noqa_added for r in reports)
    echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
    if errors or any(r.error for r in reports):
        raise SystemExit(2)


def _stdin_report(
    invocation: Invocation, stdin_filename: str | None, *, fix, unsafe, force_exclude
) -> tuple[FileReport, bytes]:
    """The report on stdin, and what ``fix -`` prints: the fixed code encoded as the
    input was (encoding, BOM), or the input's bytes unchanged when there is no fix or
    anything went wrong, so that an editor's buffer is never blanked or re-encoded."""
    name = stdin_filename or "-"
    settings = invocation.settings(Path(stdin_filename) if stdin_filename else Path.cwd() / "-")
    data = sourcefile.read_stream(sys.stdin.buffer)  # InputTooLarge: `_run` gives stdin back
    try:
        original = sourcefile.decode(data, name)
    except sourcefile.SourceError as exc:
        from xlalint.model import error_finding

        return FileReport(name, [error_finding(name, str(exc), exc.line, exc.col)], source=None), data
    if force_exclude and stdin_filename and settings.is_excluded(Path(stdin_filename)):
        return FileReport(name, [], source=original.text, fixed_source=original.text), data
    if name.endswith(".ipynb"):
        from xlalint.engine.notebook import process_notebook

        job = Job(name, settings, fix=fix, unsafe=unsafe, write=False)
        return process_notebook(job, original, stdin=True), data
    try:
        report = process_text(Job(name, settings, fix=fix, unsafe=unsafe, write=False), original, stdin=True)
    except Exception as exc:  # a bug in a rule: one clear line, exit 2
        return internal_error(name, exc, original.text), data
    if not report.changed or report.error or report.unreadable:
        return report, data
    try:
        return report, original.encode(report.fixed_source or "")
    except UnicodeEncodeError:
        report.error = f"not fixed: the fixed code cannot be encoded in {original.encoding}"
        report.fixed, report.fixed_source = [], report.source
        return report, data


def _give_back_stdin(head: bytes) -> None:
    """`fix -` is a filter: when it cannot fix, the editor gets its buffer back
    unchanged (``head``, what was read of it, then the rest of stdin streamed through
    in chunks: memory stays bounded however long the input)."""
    sys.stdout.flush()
    out = sys.stdout.buffer
    try:
        out.write(head)
        while chunk := sys.stdin.buffer.read(1 << 20):
            out.write(chunk)
        out.flush()
    except BrokenPipeError:
        # The reader is gone: nothing more to give back, and no second error at exit.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def print_settings(
    paths, select, ignore, extend_select, target_version, config, unsafe_fixes=None, extend_exclude=None, **more
) -> None:
    from xlalint.engine.settings_view import describe
    from xlalint.rules import all_rules

    paths = paths or ["."]  # as ruff's: the folder it runs in
    if len(paths) != 1 or paths[0] == "-":
        raise fail("--show-settings takes one file or folder")
    try:
        invocation = Invocation(
            select=select,
            ignore=ignore,
            extend_select=extend_select,
            target_version=target_version,
            config=config,
            need_rules=False,  # the settings are shown whatever they select
            unsafe_fixes=unsafe_fixes,
            extend_exclude=extend_exclude,
            **more,
        )
        path = Path(paths[0])
        echo(describe(path, invocation.settings(path), list(all_rules()), cache=cache_folder(invocation)))
    except ConfigError as exc:
        raise fail(str(exc)) from None
