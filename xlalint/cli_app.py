"""The typer app of the command line: every command, its options and its help
(``xlalint check|fix|rule|run|...``, ruff's conventions). ``check`` and ``fix`` hand
their arguments to ``cli_run.run``; ``cli.main`` is the entry point.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from xlalint import __version__
from xlalint.cli_run import OutputFormat, fail, print_settings, run
from xlalint.engine import reporters
from xlalint.engine.config import RULE_LIST_COMMAND, ConfigError, ConfigFinder, unknown_rule
from xlalint.engine.escaping import printable
from xlalint.engine.rule_docs import rule_url
from xlalint.help_format import Command, Group

app = typer.Typer(
    name="xlalint",
    cls=Group,
    help="A linter and autofixer for PyTorch/XLA training scripts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, as ruff's: typer's rich help shows every flag as `<bool>`.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"xlalint {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version.", metavar=""),
    ] = False,
) -> None:
    """A linter and autofixer for PyTorch/XLA training scripts."""


# Options shared by `check` and `fix` -------------------------------------------------------
Paths = Annotated[
    list[str] | None,
    typer.Argument(
        help="Files or folders to check (default: .); - reads stdin.", show_default=False, metavar="[FILES]..."
    ),
]
Select = Annotated[
    list[str] | None,
    typer.Option(
        "--select", help="Rule codes or prefixes to enable (ALL for every rule); comma-separated.", metavar="CODES"
    ),
]
Ignore = Annotated[
    list[str] | None,
    typer.Option("--ignore", help="Rule codes or prefixes to disable; comma-separated.", metavar="CODES"),
]
ExtendSelect = Annotated[
    list[str] | None, typer.Option("--extend-select", help="Codes to enable on top of select.", metavar="CODES")
]
Format = Annotated[
    OutputFormat | None,
    typer.Option(
        "--output-format",
        help="How to print findings. Default: full (code frames) on a terminal, concise (one line each) "
        "when piped. Colour (full, concise, grouped): on a terminal unless NO_COLOR is set, piped with "
        "FORCE_COLOR=1.",
        show_default=False,
        envvar="XLALINT_OUTPUT_FORMAT",
    ),
]
# metavar="": a flag takes no value, so its help shows none (typer would print `<bool>`).
Statistics = Annotated[
    bool, typer.Option("--statistics", help="Count findings per rule instead of listing them.", metavar="")
]
ExitZero = Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when findings remain.", metavar="")]
ShowFixes = Annotated[
    bool,
    typer.Option(
        "--show-fixes",
        help="Show each fix as a diff (full format); list the fixes applied (or available) per file (concise).",
        metavar="",
    ),
]
StdinFilename = Annotated[
    str | None,
    typer.Option("--stdin-filename", help="Read source from stdin; report it under this name.", metavar="PATH"),
]
TargetVersion = Annotated[
    str | None, typer.Option("--target-version", help='torch_xla version to target, e.g. "2.9".', metavar="VERSION")
]
TargetRuntime = Annotated[
    str | None,
    typer.Option(
        "--target-runtime",
        help='The backend the port writes for: "torch-xla" (default) or "torch-tpu" (TorchTPU).',
        metavar="RUNTIME",
    ),
]
ConfigFile = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        help="A config file to use instead of discovering one, or a TOML `KEY = VALUE` setting on top of "
        "the config (repeatable), e.g. --config 'select = [\"XLA1\"]'.",
        metavar="FILE|KEY=VALUE",
    ),
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the result cache.", metavar="")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print findings only: no summary.", metavar="")]
UnsafeFixes = Annotated[
    bool | None,
    typer.Option(
        "--unsafe-fixes/--no-unsafe-fixes",
        help="Also apply (or offer) fixes that may change behaviour; --no-unsafe-fixes neither applies "
        "nor mentions them. Overrides the config's `unsafe-fixes`.",
        show_default=False,
    ),
]
ExtendExclude = Annotated[
    list[str] | None,
    typer.Option(
        "--extend-exclude",
        help="Globs of files and folders to leave out, on top of `exclude`; comma-separated.",
        metavar="FILE_PATTERN",
    ),
]
ExitNonZeroOnFix = Annotated[
    bool,
    typer.Option(
        "--exit-non-zero-on-fix",
        help="Exit 1 when a fix was applied, even if no findings remain.",
        metavar="",
    ),
]
ShowFiles = Annotated[
    bool,
    typer.Option("--show-files", help="List the files that would be checked; check nothing.", metavar=""),
]
FollowImports = Annotated[
    bool | None,
    typer.Option(
        "--follow-imports/--no-follow-imports",
        help="Also check (and fix) the local modules the files import "
        "(default: on; overrides `follow-imports` in the config).",
        show_default=False,
    ),
]
ForceExclude = Annotated[
    bool,
    typer.Option(
        "--force-exclude", help="Apply exclude to files named on the command line too (for pre-commit).", metavar=""
    ),
]


# Options as ruff's (issue 41): grouped here, their logic in engine/ modules.
Exclude = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        help="Globs of files and folders to leave out, replacing the config's `exclude`; comma-separated.",
        metavar="FILE_PATTERN",
    ),
]
OutputFile = Annotated[
    Path | None,
    typer.Option(
        "--output-file", "-o", help="Write the report to this file (atomically) instead of stdout.", metavar="PATH"
    ),
]
Isolated = Annotated[
    bool, typer.Option("--isolated", help="Read no config file (the defaults and --config KEY=VALUE only).", metavar="")
]
Watch = Annotated[
    bool,
    typer.Option("--watch", "-w", help="Check again whenever a file changes (until Ctrl-C).", metavar=""),
]


@app.command(cls=Command)
def check(
    paths: Paths = None,
    select: Select = None,
    ignore: Ignore = None,
    extend_select: ExtendSelect = None,
    output_format: Format = None,
    statistics: Statistics = False,
    exit_zero: ExitZero = False,
    show_fixes: ShowFixes = False,
    stdin_filename: StdinFilename = None,
    target_version: TargetVersion = None,
    target_runtime: TargetRuntime = None,
    config: ConfigFile = None,
    no_cache: NoCache = False,
    quiet: Quiet = False,
    unsafe_fixes: UnsafeFixes = None,
    force_exclude: ForceExclude = False,
    extend_exclude: ExtendExclude = None,
    show_files: ShowFiles = False,
    exit_non_zero_on_fix: ExitNonZeroOnFix = False,
    follow_imports: FollowImports = None,
    fix: Annotated[bool, typer.Option("--fix", help="Apply fixes (same as `xlalint fix`).", metavar="")] = False,
    add_noqa: Annotated[
        bool,
        typer.Option(
            "--add-noqa",
            help="Add `# noqa: CODE` to every line with a finding (merged into an existing `# noqa:` list).",
            metavar="",
        ),
    ] = False,
    show_settings: Annotated[
        bool,
        typer.Option(
            "--show-settings",
            help="Print the configuration resolved for the file given (default: .; config file, rules, "
            "options); check nothing.",
            metavar="",
        ),
    ] = False,
    diff: Annotated[
        bool,
        typer.Option("--diff", help="Print the fixes as a diff, write nothing (as `fix --diff`).", metavar=""),
    ] = False,
    exclude: Exclude = None,
    output_file: OutputFile = None,
    isolated: Isolated = False,
    watch: Watch = False,
) -> None:
    """Check files and report findings."""
    if show_settings:
        print_settings(
            paths, select, ignore, extend_select, target_version, config, unsafe_fixes, extend_exclude,
            exclude=exclude, isolated=isolated, target_runtime=target_runtime,
        )  # fmt: skip
        return
    run(
        paths, fix=fix or diff, unsafe=unsafe_fixes, diff=diff, select=select, ignore=ignore,
        extend_select=extend_select, output_format=output_format, statistics=statistics, exit_zero=exit_zero,
        show_fixes=show_fixes, stdin_filename=stdin_filename, target_version=target_version, config=config,
        no_cache=no_cache, quiet=quiet, force_exclude=force_exclude, add_noqa=add_noqa,
        extend_exclude=extend_exclude, show_files=show_files, exit_non_zero_on_fix=exit_non_zero_on_fix,
        follow_imports=follow_imports, exclude=exclude, output_file=output_file, isolated=isolated, watch=watch,
        target_runtime=target_runtime,
    )  # fmt: skip


@app.command(cls=Command)
def clean() -> None:
    """Remove the check cache (.xlalint_cache) here, below here and at the project root."""
    from xlalint.engine.cache import project_root
    from xlalint.engine.cache_folders import cache_folders, remove
    from xlalint.rules import rules_by_code

    here = Path.cwd()
    try:  # the folder `check` writes its cache to
        root = project_root(ConfigFinder(None, rules_by_code()).for_path(here).root, here)
    except ConfigError:
        root = project_root(None, here)
    failed = False
    for folder in list(cache_folders(here, root.resolve())):
        typer.echo(f"Removing cache at: {printable(str(folder))}")
        try:
            remove(folder)
        except OSError as exc:
            typer.echo(f"xlalint: error: {printable(str(folder))}: {exc.strerror or exc}", err=True)
            failed = True
    if failed:
        raise typer.Exit(2)


@app.command("fix", cls=Command)
def fix_command(
    paths: Paths = None,
    unsafe_fixes: UnsafeFixes = None,
    diff: Annotated[
        bool, typer.Option("--diff", help="Print the changes as a diff; write nothing.", metavar="")
    ] = False,
    select: Select = None,
    ignore: Ignore = None,
    extend_select: ExtendSelect = None,
    output_format: Format = None,
    statistics: Statistics = False,
    exit_zero: ExitZero = False,
    show_fixes: ShowFixes = False,
    stdin_filename: StdinFilename = None,
    target_version: TargetVersion = None,
    target_runtime: TargetRuntime = None,
    config: ConfigFile = None,
    no_cache: NoCache = False,
    quiet: Quiet = False,
    force_exclude: ForceExclude = False,
    extend_exclude: ExtendExclude = None,
    show_files: ShowFiles = False,
    exit_non_zero_on_fix: ExitNonZeroOnFix = False,
    follow_imports: FollowImports = None,
    exclude: Exclude = None,
    output_file: OutputFile = None,
    isolated: Isolated = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Run the fixed copy of SCRIPT (as `run --bisect`: bounded by --steps), withdraw the fixes "
            "that broke it, write the others: xlalint fix --verify train.py -- ARGS",
        ),
    ] = False,
    steps: Annotated[
        int | None, typer.Option("--steps", metavar="N", help="With --verify: optimizer steps per run (default 20).")
    ] = None,
) -> None:
    """Apply fixes in place (safe ones; --unsafe-fixes adds the rest), then report what remains."""
    if verify:
        if target_runtime == "torch-tpu":
            raise fail("--verify runs the fixed script on torch_xla: a TorchTPU port cannot be run here")
        from xlalint.harness import verify as verify_fix

        json_output = output_format is not None and output_format.value == "json"
        raise typer.Exit(verify_fix.command(paths, unsafe=bool(unsafe_fixes), steps=steps, json_output=json_output))
    run(
        paths, fix=True, unsafe=unsafe_fixes, diff=diff, select=select, ignore=ignore, extend_select=extend_select,
        output_format=output_format, statistics=statistics, exit_zero=exit_zero, show_fixes=show_fixes,
        stdin_filename=stdin_filename, target_version=target_version, config=config, no_cache=no_cache,
        quiet=quiet, force_exclude=force_exclude, extend_exclude=extend_exclude, show_files=show_files,
        exit_non_zero_on_fix=exit_non_zero_on_fix, follow_imports=follow_imports, exclude=exclude,
        output_file=output_file, isolated=isolated, target_runtime=target_runtime,
    )  # fmt: skip


class RuleFormat(str, Enum):
    text = "text"
    concise = "concise"
    json = "json"


@app.command(cls=Command)
def rule(
    code: Annotated[
        str | None, typer.Argument(help="A rule code, e.g. XLA104.", show_default=False, metavar="[CODE]")
    ] = None,
    all_rules: Annotated[bool, typer.Option("--all", help="Explain every rule.", metavar="")] = False,
    output_format: Annotated[
        RuleFormat,
        typer.Option(
            "--output-format",
            help="text (the explanation), concise (one line a rule: code, name, fix availability, summary) or json.",
        ),
    ] = RuleFormat.text,
) -> None:
    """Explain a rule: why it matters, what is flagged, the fix, an example."""
    from xlalint.rules import all_rules as catalog
    from xlalint.rules import rules_by_code

    if all_rules == (code is not None):
        raise fail(f"give a rule code or --all (`{RULE_LIST_COMMAND}` lists the rules)")
    if code is not None and code.upper() == reporters.SYNTAX_ERROR_DOC["code"]:
        _explain_syntax_error(output_format)
        return
    if code is not None:
        found = rules_by_code().get(code.upper())
        if found is None:
            raise fail(
                unknown_rule(
                    "unknown rule",
                    code.upper(),
                    [*rules_by_code(), reporters.SYNTAX_ERROR_DOC["code"]],
                    prefixes=False,
                )
            )
        selected = [found]
    else:
        selected = list(catalog())
    if output_format is RuleFormat.concise:
        typer.echo(rule_lines(selected))
        return
    if output_format is RuleFormat.json:
        docs = [
            {
                "code": r.code,
                "name": r.name,
                "summary": r.summary,
                "fix": r.fix_availability,
                "explanation": r.explanation.strip(),
                "options": {k: {"default": o.default, "help": o.help} for k, o in r.options.items()},
                "url": rule_url(r.name, r.code),
            }
            for r in selected
        ]
        typer.echo(json.dumps(docs if code is None else docs[0], indent=2))
        return
    typer.echo("\n\n".join(explain(r) for r in selected))


def rule_lines(rules) -> str:
    """One line a rule, columns aligned: code, name, fix availability, summary (what
    ``rule --all --output-format concise`` prints; an unknown code points here)."""
    name_width = max((len(r.name) for r in rules), default=0)
    fix_width = max((len(r.fix_availability) for r in rules), default=0)
    return "\n".join(
        f"{r.code}  {r.name:<{name_width}}  fix: {r.fix_availability:<{fix_width}}  {r.summary}" for r in rules
    )


def _explain_syntax_error(output_format: RuleFormat) -> None:
    """XLA000 is not a rule one selects: it is how a file that cannot be checked is reported."""
    doc = reporters.SYNTAX_ERROR_DOC
    if output_format is RuleFormat.concise:
        typer.echo(f"{doc['code']}  {doc['name']}  fix: none  {doc['summary']}")
        return
    if output_format is RuleFormat.json:
        typer.echo(
            json.dumps({**doc, "fix": "none", "options": {}, "url": rule_url(doc["name"], doc["code"])}, indent=2)
        )
        return
    from xlalint.docs import explain_syntax_error

    typer.echo(explain_syntax_error())


def explain(rule_class) -> str:
    from xlalint.docs import explain as markdown

    return markdown(rule_class)


@app.command("version", cls=Command)
def version_command(
    output_format: Annotated[
        RuleFormat, typer.Option("--output-format", help="text or json (concise is text).")
    ] = RuleFormat.text,
) -> None:
    """Print xlalint's version and the torch / torch_xla versions it targets."""
    from xlalint.engine.targets import describe_version

    typer.echo(describe_version(as_json=output_format is RuleFormat.json))


@app.command(cls=Command)
def server() -> None:
    """Run the language server (LSP over stdio) for editors; needs the `server` extra."""
    import importlib.util

    if importlib.util.find_spec("pygls") is None or importlib.util.find_spec("lsprotocol") is None:
        from xlalint.install_hint import install_command

        raise fail(f"the language server needs pygls and lsprotocol: {install_command('server')}")
    from xlalint.engine import collector
    from xlalint.server import start

    collector.one_shot(False)  # a long-lived process: what it leaves must stay collectable
    start()


def _register_harness() -> None:
    import importlib.util

    if importlib.util.find_spec("xlalint.harness.command") is not None:
        from xlalint.harness.command import register

        register(app)


_register_harness()
