"""Every command's exit codes, in one table: each ``--help`` epilog and README's table are made
from it, and a test holds the commands to it."""

from __future__ import annotations

_USAGE = ("2", "usage or input error: bad option; missing, corrupt or inconsistent file")
_CANNOT = ("3", "could not check: no driver or GPU, budget spent, or a topodoctor bug")
_SIGNAL = ("128+N", "stopped by signal N (143: SIGTERM); the probe child is killed too")
# Every command's exit codes, in one table: each command's --help and README's table are made
# from it (a test holds README to it), so the two cannot drift apart.
EXIT_TABLE: dict[str, tuple[tuple[str, str], ...]] = {
    "scan": (("0", "printed"), _USAGE, _CANNOT, _SIGNAL),
    "record": (("0", "written"), _USAGE, _CANNOT, _SIGNAL),
    "check": (
        ("0", "healthy (findings below the fail level allowed)"),
        ("1", "unhealthy: a finding at or above the fail level"),
        ("2", "usage or input error; or an --expect file it could not use, and no fault"),
        ("3", "could not check: no driver or GPU, budget spent, a measurement not made"),
        _SIGNAL,
    ),
    "expect": (("0", "written"), ("1", "refused: the host has error findings (--force)"), _USAGE, _CANNOT, _SIGNAL),
    "bandwidth": (
        ("0", "measured; no bandwidth finding at error level"),
        ("1", "a bandwidth finding (TD7xx) at error level"),
        _USAGE,
        _CANNOT,
        _SIGNAL,
    ),
    "collectives": (
        ("0", "measured or judged; no finding at error level"),
        ("1", "a finding at error level: a slow, hung or wrong op, a wrong transport"),
        _USAGE,
        _CANNOT,
        _SIGNAL,
    ),
    "fleet": (
        ("0", "every node healthy"),
        ("1", "a node to drain, or a finding fleet-wide (it drains no node)"),
        ("2", "usage error; no readable result; a history database bad or locked"),
        ("3", "a node or a file could not be judged, and nothing above"),
        _SIGNAL,
    ),
    "nccl-topo": (
        ("0", "written; or --lint found no error"),
        ("1", "--lint: the file has an error for this host"),
        _USAGE,
        _CANNOT,
        _SIGNAL,
    ),
    "nccl-log": (
        ("0", "read; no failure at error level"),
        ("1", "the logs show a failure (a finding at error level)"),
        ("2", "usage or input error: a file missing, unreadable, too large, or no files"),
        _CANNOT,
        _SIGNAL,
    ),
    "job": (
        ("0", "nothing wrong found"),
        ("1", "a finding at the fail level: a culprit (rank, host, GPU), a stall"),
        ("2", "usage or input error: no readable dump, a corrupt map or RAS file"),
        ("3", "could not analyse: no RAS or NVML answer and nothing else; budget spent"),
        _SIGNAL,
    ),
    "rules": (("0", "listed"), _USAGE),
    "explain": (("0", "shown"), _USAGE),
}


def _exits(command: str) -> str:
    """A command's epilog; click prints it as written (``\\b`` stops it re-flowing the lines)."""
    return "Exit codes:\n\n\b\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_TABLE[command])


EXITS = {
    "all": "Exit codes: 0 ok, 1 unhealthy, 2 usage or input error, 3 could not check; "
    "each command's --help has its own.",
    **{command: _exits(command) for command in EXIT_TABLE},
}
EXITS["check"] += "\n\nWith --format line, every outcome (exit 3 included) is one line on stdout."


def exit_codes_markdown() -> str:
    """README's table of every command's exit codes, made from ``EXIT_TABLE``."""
    codes = ("0", "1", "2", "3")
    rows = ["| command | " + " | ".join(codes) + " |", "| --- |" + " --- |" * len(codes)]
    for command, entries in EXIT_TABLE.items():
        meaning = dict(entries)
        rows.append(f"| `{command}` | " + " | ".join(meaning.get(c, "-") for c in codes) + " |")
    return "\n".join(rows) + "\n"
