"""``config``: every setting a site may keep in its config file (cli/config.py), its value for a
run here and where the value came from."""

from __future__ import annotations

import json
import os
from typing import Any

from topodoctor.cli import config
from topodoctor.cli.args import ConfigArgs
from topodoctor.cli.io import Env
from topodoctor.cli.table import COMMANDS
from topodoctor.core.errors import InputError
from topodoctor.core.text import printable
from topodoctor.model.outcome import DONE


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _line(v: config.Value) -> str:
    """One setting as a line of TOML (commented out where it has no value), then where it came from."""
    if v.value is None:
        return f"# {v.setting.key} = (not set)  # {v.source}"
    return f"{v.setting.key} = {json.dumps(_plain(v.value))}  # {v.source}"


def run_config(args: ConfigArgs, env: Env) -> int:
    """Each setting of each command (or of COMMAND), as a run here would take it."""
    names = [n for n in COMMANDS if any(True for _ in config.settings(n))]
    if args.command is not None and args.command not in names:
        raise InputError(f"no settings for {printable(args.command)!r} (commands with settings: {', '.join(names)})")
    path, named_by = config.config_path(args.config, os.environ)
    doc = config.load(path) if path is not None else {}  # read once for every command's settings
    shown = [n for n in names if args.command in (None, n)]
    values = [v for n in shown for v in config.resolve(n, {}, args.config, os.environ, doc=doc)]
    if args.fmt == "json":
        doc = {
            "file": None if path is None else str(path),
            "file_named_by": named_by or None,
            "settings": [
                {
                    "table": v.setting.table,
                    "key": v.setting.key,
                    "value": _plain(v.value),
                    "default": _plain(v.setting.default),
                    "source": v.source,
                    "environment": v.setting.env,
                }
                for v in values
            ],
        }
        env.render(lambda: env.emit_json(doc))
        return DONE.exit_code
    lines = [f"# settings file: {path} ({named_by})" if path else "# settings file: none (defaults and environment)"]
    table = ""
    for v in values:
        if v.setting.table != table:
            table = v.setting.table
            lines += ["", f"[{table}]"]
        lines.append(_line(v))
    env.render(lambda: env.emit("\n".join(lines)))
    return DONE.exit_code
