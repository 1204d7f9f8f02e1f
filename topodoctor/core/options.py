"""The option spec: every option of every command declared once, as a field of the command's
frozen request (its service's input: service/request_check.py and the others; the commands
without a service keep theirs in cli/args*.py), with its flags, type, default, choices, help
and whether it changes the host the probe reads.

From these declarations come the typer command (cli/commands.py ``typer_command``), the early
read of the command line that decides the early probe (``early_read``, before anything else is
imported), the request the command runs with, and the same request built from the Python API's
keywords (``from_keywords``). Nothing here imports typer: the early read runs before it loads. A
new option is one ``option(...)`` field in its command's class.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from topodoctor.core.errors import InputError

T = TypeVar("T")
REQUIRED: Any = MISSING  # an option or argument that has no default: the command line must give it


@dataclass(frozen=True)
class Opt:
    """One option or argument as the command line reads it."""

    flags: tuple[str, ...]  # "--format", "-f"; "--matrix/--no-matrix" for a flag with an off switch; () for an argument
    help: str = ""
    metavar: str | None = None
    kind: type = str  # str, int, float, bool or Path: what a value is read as
    choices: tuple[str, ...] = ()  # the values it takes (shown by its help and refused otherwise)
    many: bool = False  # repeatable: every value given, in order (an argument: FILE...)
    minimum: float | None = None
    maximum: float | None = None
    parse: Callable[[Any], Any] | None = None  # the value as the command uses it; InputError refuses it
    probes: bool = False  # changes which host the probe reads, or what its child does (the early probe)
    hidden: bool = False  # an argument named in the usage line only; an option left out of the help
    # a default a site tunes: read from the config file's table for the command, or the environment,
    # where the command line does not give it (cli/config.py; shown by `topodoctor config`)
    setting: bool = False

    @property
    def argument(self) -> bool:
        """A positional argument, not an option."""
        return not self.flags

    @property
    def names(self) -> tuple[str, ...]:
        """Every word that names it: each flag, and the off switch of a flag that has one."""
        return tuple(n for f in self.flags for n in f.split("/"))

    @property
    def takes_value(self) -> bool:
        """Whether it takes a value (a flag does not)."""
        return self.kind is not bool and not self.argument

    def read(self, text: str) -> Any:
        """One value from the command line, as the command reads it: ValueError or InputError
        when it refuses it (then typer says why, in its words)."""
        if self.choices and text not in self.choices:
            raise ValueError(f"{text!r} is not one of {self.choices}")
        value: Any = self.kind(text)
        if self.kind is float and math.isnan(value):  # NaN compares false with every limit
            raise ValueError(f"{text} is not a number")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{text} is below {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{text} is above {self.maximum:g}")
        return value


def option(*flags: str, default: Any, help: str = "", **spec: Any) -> Any:
    """A field of a command's options object that the command line sets (see ``Opt`` for ``spec``);
    ``default`` is REQUIRED for one the command line must give."""
    opt = Opt(tuple(flags), help, **spec)
    return field(default=default, metadata={"opt": opt})


def argument(metavar: str, default: Any = REQUIRED, **spec: Any) -> Any:
    """A field set by positional words (``FILE...``): hidden from the option list, named by
    ``metavar`` in the usage line."""
    return field(default=default, metadata={"opt": Opt((), metavar=metavar, hidden=True, **spec)})


def group(cls: type[T]) -> T:
    """A field holding a part of the command's options (its own options object): its options are
    the command's, listed under the part's heading (``HEADING``) in the help."""
    return field(default_factory=cls, metadata={"group": cls})


def specs(cls: type) -> Iterator[tuple[str, Opt, Any]]:
    """(name, Opt, default) of every option of an options class, its parts' included, in order."""
    for f in fields(cls):
        if "group" in f.metadata:
            yield from specs(f.metadata["group"])
        elif "opt" in f.metadata:
            yield f.name, f.metadata["opt"], f.default


def headings(cls: type) -> dict[str, tuple[str, ...]]:
    """Each part's help heading and the names of its options, in order (a class with parts; a part
    with no ``HEADING`` is listed with the command's other options)."""
    out: dict[str, tuple[str, ...]] = {}
    for f in fields(cls):
        part = f.metadata.get("group")
        heading = getattr(part, "HEADING", None)
        if part is not None and heading is not None:  # parts under one heading are listed together, in order
            out[heading] = out.get(heading, ()) + tuple(name for name, _, _ in specs(part))
    return out


def build(cls: type[T], values: dict[str, Any]) -> T:
    """The options object of ``cls`` (and its parts) from every option's value by name."""
    kwargs: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        part = f.metadata.get("group")
        if part is not None:
            kwargs[f.name] = build(part, values)
        elif "opt" in f.metadata and f.name in values:
            kwargs[f.name] = values[f.name]
    return cls(**kwargs)


def plain(opt: Opt, value: Any) -> Any:
    """A value as typer hands it (an enum member, a list, None for a repeatable option not
    given) as the options object holds it: plain values, tuples."""
    if opt.many:
        return tuple(_plain(v) for v in value or ())
    return _plain(value)


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)  # an Enum member typer made for a choice


def parsed(opt: Opt, value: Any) -> Any:
    """``value`` as the command uses it (``Opt.parse``); InputError refuses it."""
    return opt.parse(value) if opt.parse is not None and value is not None else value


@dataclass(frozen=True)
class EarlyRead:
    """What the early read of a command line found: the options it could read, by name, and
    whether the whole line was read (no help request, nothing unknown, refused, missing or
    repeated). Only a clean line may start the early probe."""

    values: dict[str, Any]
    clean: bool


def early_read(words: Sequence[str], cls: type, full: bool = False) -> EarlyRead:
    """Read ``words`` (the command's, after its name) by the spec of ``cls``, as typer will: a
    value attached (``--format=json``, ``-fjson``) or following, a flag alone. Options that
    change the probe (``probes``) are read in full, each value as the command reads it; every
    other value is only stepped over, but for the format, which decides whether a usage error
    is told as the one-line verdict. With ``full``, every value is read (the line the command
    then runs with, without typer: cli/early.py ``direct_options``)."""
    by_name = {n: (name, opt) for name, opt, _ in specs(cls) for n in opt.names}
    read: dict[str, list[Any]] = {}
    clean = True
    it = iter(words)
    for word in it:
        attached: str | None = None
        if word.startswith("--"):
            word, eq, rest = word.partition("=")
            attached = rest if eq else None
        elif word.startswith("-") and len(word) > 2 and word[:2] in by_name:
            word, attached = word[:2], word[2:]  # -fjson: the value attached (click's reading)
        if word not in by_name:
            clean = False  # a help request, an argument, an unknown option: typer answers it
            continue
        name, opt = by_name[word]
        if not opt.takes_value:
            clean = clean and attached is None
            read.setdefault(name, []).append(not word.startswith("--no-") if "/" in opt.flags[0] else True)
            continue
        text = attached if attached is not None else next(it, None)
        if text is None:
            return EarlyRead(_settled(read, by_name), False)
        if full or opt.probes or name == "fmt":
            try:
                value = opt.read(text)
            except (ValueError, InputError):
                clean = False
                continue
            read.setdefault(name, []).append(value)
        clean = clean and (opt.many or name not in read or len(read[name]) == 1)
    values = _settled(read, by_name)
    return EarlyRead(values, clean and len(values) == len(read))


def _settled(read: dict[str, list[Any]], by_name: dict[str, tuple[str, Opt]]) -> dict[str, Any]:
    """The values read, each as the command uses it; one the command refuses is left out."""
    opts = {name: opt for name, opt in by_name.values()}
    out: dict[str, Any] = {}
    for name, got in read.items():
        opt = opts[name]
        try:
            out[name] = parsed(opt, tuple(got) if opt.many else got[-1])
        except (ValueError, InputError):
            continue
    return out


def from_keywords(cls: type[T], given: Mapping[str, Any], said: Mapping[str, str] | None = None) -> T:
    """The options object of ``cls`` from Python's keywords (by field name), each value read by the
    same spec as the command line's: held to its choices and limits, then made what the command
    uses (``Opt.parse``); a string is read as the command line reads it, one string given to a
    repeatable option is one value. An option not given keeps the spec's default. ``said`` names
    the keyword a caller calls a field by, for the error; InputError refuses a value."""
    spec = {name: (opt, default) for name, opt, default in specs(cls)}
    values: dict[str, Any] = {}
    for name, value in given.items():
        if name not in spec:
            raise TypeError(f"{cls.__name__} has no option {name!r}")
        opt, default = spec[name]
        shown = (said or {}).get(name, name)
        if value is None and default is not None:  # None is "not given" only where the default is
            raise InputError(f"{shown} must be given a value, not None (leave it out for its default)")
        values[name] = _keyword(opt, value, shown)
    return build(cls, values)


def _keyword(opt: Opt, value: Any, shown: str) -> Any:
    """One keyword's value as the command uses it (``from_keywords``)."""
    if value is None:
        return None
    if opt.many:
        items = (value,) if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) else tuple(value)
        return parsed(opt, tuple(_one(opt, v, shown) for v in items))
    if opt.parse is not None and opt.kind is str and not isinstance(value, str):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{shown} must be a string as the command line reads it, or a positive whole number")
        return value  # already what the command uses (a size in bytes where the command reads "256M")
    return parsed(opt, _one(opt, value, shown))


def _one(opt: Opt, value: Any, shown: str) -> Any:
    """One value of the option's kind, within its choices and limits."""
    kinds = {bool: (bool,), int: (int,), float: (int, float), Path: (str, PathLike)}.get(opt.kind, (str,))
    if isinstance(value, bool) is not (opt.kind is bool) or not isinstance(value, kinds):
        names = {bool: "True or False", int: "an integer", float: "a number", Path: "a path"}
        raise InputError(f"{shown} must be {names.get(opt.kind, 'a string')}, not {value!r}")
    if opt.choices and value not in opt.choices:
        raise InputError(f"{shown} must be one of {', '.join(opt.choices)}, not {value!r}")
    given: Any = value
    try:
        out: Any = Path(given) if opt.kind is Path else float(given) if opt.kind is float else given
    except OverflowError:  # an int past float's range
        raise InputError(f"{shown} is out of range: an integer too large for a number") from None
    if opt.kind is float and math.isnan(out):  # NaN compares false with every limit
        raise InputError(f"{shown} must be a number, not nan")
    if opt.minimum is not None and out < opt.minimum:
        raise InputError(f"{shown} must be at least {opt.minimum:g}, not {out!r}")
    if opt.maximum is not None and out > opt.maximum:
        raise InputError(f"{shown} must be at most {opt.maximum:g}, not {out!r}")
    return out
