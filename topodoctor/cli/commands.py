"""The typer app, made from the command table (cli/table.py) and each command's options spec
(core/options.py): a command's typer command is built when it is named, from the fields of its
options object, and runs its runner with that object.

Every failure ends as one line ("topodoctor: error: ..." on stderr, or the one requested
drain-reason line) and an exit code from topodoctor.core.errors: never a traceback, and never
exit 1 for a failure of topodoctor itself.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from dataclasses import replace
from enum import Enum
from typing import Annotated, Any, ClassVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from topodoctor import __version__
from topodoctor.cli import config
from topodoctor.cli import io as cli_io
from topodoctor.cli.early import line_asked
from topodoctor.cli.exit_codes import EXITS
from topodoctor.cli.table import COMMANDS, Command
from topodoctor.core.errors import EXIT_USAGE, InputError
from topodoctor.core.options import REQUIRED, Opt, build, headings, parsed, plain, specs


class CommandGroup(TyperGroup):
    """topodoctor's commands, each built from the command table when it is named, and a
    single-valued option may be given once.

    Building on demand is click's lazy-group pattern: a prolog's ``check`` builds neither the
    collectives' options nor their modules. Click keeps the last of ``--replay a --replay b``
    and says nothing, so a check would judge the other recording: that is refused."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command's name, in the table's order (help, suggestions, completion)."""
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name``, built and registered the first time it is asked for."""
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(typer_command(COMMANDS[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        """The command click resolves, after refusing any single-valued option given twice."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            _refuse_repeats(ctx, cmd, rest)
        return name, cmd, rest


def _refuse_repeats(ctx: Any, cmd: Any, args: list[str]) -> None:
    """A usage error for an option that takes one value and was given more than once."""
    options = {opt: p for p in cmd.params if isinstance(p, TyperOption) for opt in (*p.opts, *p.secondary_opts)}
    seen: dict[str, int] = {}
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            break
        flag, attached = token.split("=", 1)[0] if token.startswith("--") else token, "=" in token
        param = options.get(flag)
        if param is None:
            continue
        takes_value = not param.is_flag and not param.count
        if takes_value and not attached:
            next(tokens, None)  # its value, whatever it looks like
        if takes_value and not param.multiple:
            name = param.name or flag  # click types the name as optional; a typer option always has one
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                raise typer.BadParameter("given more than once; give it once", ctx=ctx, param=param)


class PlainUsage(TyperCommand):
    """Arguments in the usage line as their metavar (``CODE``), not typer's ``{CODE}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line's pieces: the options' placeholder, then each argument's metavar."""
        pieces = [self.options_metavar] if self.options_metavar else []
        return pieces + [str(p.metavar or p.name).upper() for p in self.params if isinstance(p, TyperArgument)]


class GroupedOptions(TyperCommand):
    """Options listed under headings (``OPTION_GROUPS``: heading -> parameter names, in order), for a
    command whose options object has parts: the rest come last under "Options"."""

    OPTION_GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {}

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """click's options section, one section per heading of ``OPTION_GROUPS``."""
        rows = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        placed: set[str | None] = set()
        for heading, names in self.OPTION_GROUPS.items():
            records = [rows[n] for n in names if rows.get(n)]
            placed.update(names)
            if records:
                with formatter.section(heading):
                    formatter.write_dl(records)
        rest = [r for n, r in rows.items() if n not in placed and r]
        if rest:
            with formatter.section("Options"):
                formatter.write_dl(rest)


def _annotation(name: str, opt: Opt, default: Any) -> Any:
    """The type and typer parameter a spec'd option is declared with."""
    kind: Any = Enum(name, {c: c for c in opt.choices}, type=str) if opt.choices else opt.kind
    if opt.many:
        kind = list[kind]
    if default is None or (opt.many and default is not REQUIRED):
        kind = kind | None
    extra: dict[str, Any] = {"metavar": opt.metavar, "min": opt.minimum, "max": opt.maximum}
    if opt.parse is not None:
        extra["callback"] = _parse_callback(opt)
    elif opt.kind is float and not opt.many:
        extra["callback"] = _refuse_nan
    if opt.argument:
        return Annotated[kind, typer.Argument(metavar=opt.metavar, hidden=opt.hidden)]
    return Annotated[kind, typer.Option(*opt.flags, help=opt.help, hidden=opt.hidden, **extra)]


def _refuse_nan(value: float | None) -> float | None:
    """NaN compares false with every limit: typer's range lets it through to the command."""
    if value is not None and math.isnan(value):
        raise typer.BadParameter("nan is not a number")
    return value


def _parse_callback(opt: Opt) -> Any:
    def check(value: Any) -> Any:
        try:
            return parsed(opt, plain(opt, value))
        except InputError as exc:
            raise typer.BadParameter(str(exc).removeprefix(f"{opt.flags[0]} ")) from None

    return check


def typer_command(command: Command) -> Any:
    """The click command of a table entry: its options from the spec of its options class, and
    a body that builds the options object and runs the command's runner with it."""
    cls = command.options_class()
    spec = {name: opt for name, opt, _ in specs(cls)}
    params = []
    for name, opt, default in specs(cls):
        shown = None if opt.many and default is not REQUIRED else default
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if default is REQUIRED else shown,
                annotation=_annotation(name, opt, default),
            )
        )

    def body(ctx: typer.Context, **given: Any) -> None:
        # a setting the command line left at its default is the environment's or the file's
        values = {
            name: plain(spec[name], value)
            for name, value in given.items()
            if not spec[name].setting or getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"
        }
        env = ctx.obj if isinstance(ctx.obj, cli_io.Env) else cli_io.Env(line=line_asked(sys.argv[1:]))
        if "fmt" in values:  # parsed: the one-line format is now known for certain (check, job)
            env = replace(env, line=values["fmt"] == "line")

        def start(values: dict[str, Any], env: cli_io.Env) -> int:
            options: Any = build(cls, config.settle(command.name, cls, values, os.environ))
            return command.runner_function()(options, env)  # type: ignore[no-any-return]

        run = env.reports_errors(start)
        try:
            code = run(values, env)
        except cli_io.Exit as exc:  # ours, as click's own: whoever runs the app (a test's runner too) knows it
            raise typer.Exit(exc.exit_code) from None
        raise typer.Exit(code)

    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    body.__signature__ = inspect.Signature([context, *params])  # type: ignore[attr-defined]
    body.__annotations__ = {"ctx": typer.Context, **{p.name: p.annotation for p in params}}
    body.__doc__ = command.help
    parts = headings(cls)
    kind: type[TyperCommand] = PlainUsage if command.usage == "arguments" else TyperCommand
    if parts:
        kind = type("Grouped", (GroupedOptions,), {"OPTION_GROUPS": parts})
    one = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    one.command(command.name, epilog=EXITS[command.name], cls=kind)(body)
    return typer.main.get_command(one)


def version_callback(value: bool) -> None:
    """``--version``: print the version and exit before anything else runs."""
    if value:
        env = cli_io.Env()
        env.render(lambda: env.emit(f"topodoctor {__version__}"))
        raise typer.Exit(0)


app = typer.Typer(
    name="topodoctor",
    cls=CommandGroup,
    help="GPU topology inspector and doctor: scan the topology, check its health, measure its links.",
    epilog=EXITS["all"],
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 80},
)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """GPU topology inspector and doctor."""


def main(argv: list[str] | None = None, env: cli_io.Env | None = None) -> int:
    """Run one command; every outcome becomes an exit code and at most one error line."""
    words = sys.argv[1:] if argv is None else argv
    # The one-line format from the first instruction: a usage error or a signal before the
    # command's body runs is that line too.
    env = env or cli_io.Env(line=line_asked(words))
    with cli_io.install_signal_handlers():
        return cli_io.run_app(env, app, argv, EXIT_USAGE)


def run() -> None:
    """The commands, once the entry point (cli/start.py) has set up the streams and the early
    probe; ends the process (cli/start.py ``finish``)."""
    env = cli_io.Env(line=line_asked(sys.argv[1:]))
    cli_io.finish(env, main(env=env))
