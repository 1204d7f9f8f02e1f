"""Every command's exit codes, from the command table (cli/table.py): each ``--help`` epilog and
README's table are made from it, and a test holds the commands to it."""

from __future__ import annotations

from topodoctor.cli.table import COMMANDS

# README lists the commands that judge a host first, the rule listings last.
_README_ORDER = (
    "scan",
    "record",
    "check",
    "expect",
    "bandwidth",
    "collectives",
    "fleet",
    "nccl-topo",
    "nccl-log",
    "diagnose",
    "job",
    "rules",
    "explain",
    "config",
)
EXIT_TABLE: dict[str, tuple[tuple[str, str], ...]] = {name: COMMANDS[name].exits for name in _README_ORDER}


def _exits(command: str) -> str:
    """A command's epilog; click prints it as written (``\\b`` stops it re-flowing the lines)."""
    text = "Exit codes:\n\n\b\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in COMMANDS[command].exits)
    note = COMMANDS[command].note
    return text + (f"\n\n{note}" if note else "")


EXITS = {
    "all": "Exit codes: 0 ok, 1 unhealthy, 2 usage or input error, 3 could not check; "
    "each command's --help has its own.",
    **{command: _exits(command) for command in COMMANDS},
}


def exit_codes_markdown() -> str:
    """README's table of every command's exit codes, made from the command table."""
    codes = ("0", "1", "2", "3")
    rows = ["| command | " + " | ".join(codes) + " |", "| --- |" + " --- |" * len(codes)]
    for command, entries in EXIT_TABLE.items():
        meaning = dict(entries)
        rows.append(f"| `{command}` | " + " | ".join(meaning.get(c, "-") for c in codes) + " |")
    return "\n".join(rows) + "\n"
