"""Settings in a file: the defaults a site tunes (thresholds, budgets, fail levels), read from a
TOML file's table for each command, or from the environment, where the command line does not
give them.

Which options are settings, their keys, types, limits and defaults come from the option spec
(core/options.py, ``setting=True``): the file feeds the same spec, there is no second list. A
command's table is named for it (``[check]``, ``[fleet]``), a part of its options for the part
(``[fleet.history]``); a key is the option's long flag without its dashes (``drift-tolerance``).
Precedence, highest first: the command line, the environment (``TOPODOCTOR_FLEET_HISTORY_DRIFT_
TOLERANCE``), the file, the spec's default. The file is ``--config FILE``, else the one
``TOPODOCTOR_CONFIG`` names, else /etc/topodoctor/config.toml where it exists; a file named
that is missing, unreadable, not TOML, or holds a table or key no command has is a usage error
(exit 2), told in one line. `topodoctor config` shows every setting, its value and where it
came from."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from topodoctor.cli.table import COMMANDS
from topodoctor.core import fileio
from topodoctor.core.errors import InputError
from topodoctor.core.options import Opt, parsed

SYSTEM_FILE = Path("/etc/topodoctor/config.toml")
FILE_ENV = "TOPODOCTOR_CONFIG"
MAX_BYTES = 1 << 20  # a settings file is a page of text


@dataclass(frozen=True)
class ConfigSetting:
    """One option a site may set: its table and key in the file, its field name, and its spec."""

    table: str
    key: str
    name: str
    opt: Opt
    default: Any

    @property
    def env(self) -> str:
        """The environment variable that sets it (above the file, below the command line)."""
        return "TOPODOCTOR_" + f"{self.table}_{self.key}".upper().replace(".", "_").replace("-", "_")


@dataclass(frozen=True)
class Value:
    """A setting's value for this run, and where it came from (``flag``, ``environment NAME``,
    ``file PATH`` or ``default``)."""

    setting: ConfigSetting
    value: Any
    source: str


def settings(command: str, cls: type | None = None) -> Iterator[ConfigSetting]:
    """Every setting of ``command`` (its options class ``cls``), in the spec's order."""
    yield from _walk(command, cls or COMMANDS[command].options_class())


def _walk(table: str, cls: type) -> Iterator[ConfigSetting]:
    for f in fields(cls):
        part = f.metadata.get("group")
        if part is not None:
            sub = getattr(part, "CONFIG_TABLE", f.name)  # "": a part whose settings are its command's
            yield from _walk(f"{table}.{sub}" if sub else table, part)
        elif "opt" in f.metadata and f.metadata["opt"].setting:
            opt: Opt = f.metadata["opt"]
            yield ConfigSetting(table, opt.flags[0].removeprefix("--"), f.name, opt, f.default)


def every_setting() -> Iterator[ConfigSetting]:
    """The settings of every command that has any, in the command table's order."""
    for name in COMMANDS:
        yield from settings(name)


def config_path(given: Path | None, environ: Mapping[str, str]) -> tuple[Path | None, str]:
    """The settings file of this run and what named it: ``--config``, the environment, or the
    system's file where it exists; (None, "") for none."""
    if given is not None:
        return given, "--config"
    if environ.get(FILE_ENV):
        return Path(environ[FILE_ENV]), FILE_ENV
    return (SYSTEM_FILE, "system") if SYSTEM_FILE.is_file() else (None, "")


def load(path: Path) -> dict[str, Any]:
    """The file's tables, each table and key checked against the commands' settings."""
    toml = _toml()
    text = fileio.read_text(path, "config file", MAX_BYTES)
    try:
        doc: dict[str, Any] = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise InputError(f"config file {fileio.shown(path)} is not TOML: {exc}") from None
    known: dict[str, set[str]] = {}
    for s in every_setting():
        known.setdefault(s.table, set()).add(s.key)
    _check(doc, "", known, path)
    for s in every_setting():  # every value, whichever command reads it: a bad file is bad for all
        table = _table(doc, s.table)
        if s.key in table:
            _from_toml(s, table[s.key], f"config file {fileio.shown(path)} [{s.table}]")
    return doc


def _check(doc: Mapping[str, Any], prefix: str, known: dict[str, set[str]], path: Path) -> None:
    for key, value in doc.items():
        table = f"{prefix}{key}"
        if isinstance(value, dict) and table in known:
            _check(value, f"{table}.", known, path)
        elif prefix and key in known.get(prefix[:-1], set()):
            continue
        else:
            what = f"table [{table}]" if isinstance(value, dict) else f"key {key!r} in [{prefix[:-1]}]"
            if not prefix and not isinstance(value, dict):
                what = f"key {key!r} outside a table"
            tables = ", ".join(f"[{t}]" for t in sorted(known))
            raise InputError(f"config file {fileio.shown(path)}: no {what} (settings are in {tables})")


def _toml() -> Any:
    """tomllib (Python 3.11 and later), or tomli where it is installed (the same parser, for 3.10)."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)  # loaded only when a file is read
        except ModuleNotFoundError:
            continue
    raise InputError("reading a config file needs Python 3.11 or later, or `pip install tomli`")


def _table(doc: Mapping[str, Any], table: str) -> Mapping[str, Any]:
    for part in table.split("."):
        doc = doc.get(part) or {}
    return doc


def _from_text(s: ConfigSetting, text: str, where: str) -> Any:
    """A value the environment gives, read as the command line reads it (a list: comma-separated)."""
    try:
        if s.opt.many:
            return parsed(s.opt, tuple(s.opt.read(t.strip()) for t in text.split(",") if t.strip()))
        if s.opt.kind is bool:
            if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(f"{text!r} is not true or false")
            return parsed(s.opt, text.lower() in ("1", "true", "yes"))
        return parsed(s.opt, s.opt.read(text))
    except (ValueError, InputError) as exc:
        raise InputError(f"{where}: {exc}") from None


def _from_toml(s: ConfigSetting, value: Any, where: str) -> Any:
    """A value the file gives: of the option's type (a list for a repeatable one), then read as
    the command line reads it (its choices and limits)."""
    wanted: tuple[type, ...] = {bool: (bool,), int: (int,), float: (int, float)}.get(s.opt.kind, (str,))
    items = value if s.opt.many and isinstance(value, list) else [value]
    if (s.opt.many and not isinstance(value, list)) or any(
        isinstance(v, bool) is not (bool in wanted) or not isinstance(v, wanted) for v in items
    ):
        names = {bool: "true or false", int: "an integer", float: "a number"}
        kind = "a list of strings" if s.opt.many else names.get(s.opt.kind, "a string")
        raise InputError(f"{where}: {s.key} must be {kind}")
    if s.opt.kind is bool:
        return parsed(s.opt, value)
    return _from_text(s, ",".join(map(str, items)) if s.opt.many else str(value), where)


def resolve(
    command: str,
    given: Mapping[str, Any],
    config: Path | None,
    environ: Mapping[str, str],
    cls: type | None = None,
    doc: Mapping[str, Any] | None = None,
) -> list[Value]:
    """Every setting of ``command`` for this run: the command line's value (``given``, by field
    name), else the environment's, else the file's (``doc``, the file read already; else read
    here), else the default."""
    path, _ = config_path(config, environ)
    if doc is None:
        doc = load(path) if path is not None else {}
    out = []
    for s in settings(command, cls):
        table = _table(doc, s.table)
        if s.name in given:
            out.append(Value(s, given[s.name], "flag"))
        elif s.env in environ:
            out.append(Value(s, _from_text(s, environ[s.env], s.env), f"environment {s.env}"))
        elif s.key in table:
            where = f"config file {fileio.shown(path or '')} [{s.table}]"
            out.append(Value(s, _from_toml(s, table[s.key], where), f"file {path}"))
        else:
            out.append(Value(s, s.default, "default"))
    return out


def settle(command: str, cls: type, values: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``values`` (the options the command line gave, by field name) with every setting it did not
    give taken from the environment, the file or the default: what the options object is built from."""
    resolved = resolve(command, values, values.get("config"), environ, cls)
    return {**values, **{v.setting.name: v.value for v in resolved if v.source != "default"}}
