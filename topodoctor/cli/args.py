"""The options of the commands that read one host (record, expect, rules, explain, nccl-topo) and of
``config``: one frozen object per command, each field one option (core/options.py); ``check``'s and
``scan``'s are their services' requests (service/request_check.py, service/request_scan.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.core.options import REQUIRED, argument, option
from topodoctor.core.shared_options import config_file, fmt, output, replay, sysfs_root, timeout
from topodoctor.service.request_check import LEVELS


@dataclass(frozen=True)
class RecordArgs:
    """``record``: where the recording goes, and what it keeps."""

    output: Path | None = output()
    label: str = option("--label", default="", metavar="TEXT", help="A name for the host kind.")
    no_scrub: bool = option("--no-scrub", default=False, kind=bool, help="Keep UUIDs, serials and the host name.")
    list_bundled: bool = option("--list", default=False, kind=bool, help="List the recordings bundled with topodoctor.")
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(120.0)


@dataclass(frozen=True)
class RulesArgs:
    """``rules``: how to list them."""

    fmt: str = fmt(("text", "json"), "text or json.")
    markdown: bool = option("--markdown", default=False, kind=bool, help="Print docs/rules.md.")


@dataclass(frozen=True)
class ExplainArgs:
    """``explain CODE``."""

    code: str = argument("CODE")
    markdown: bool = option("--markdown", default=False, kind=bool, help="Print the Markdown source.")


@dataclass(frozen=True)
class ExpectArgs:
    """``expect``: the host to take the expectations from, and where to write them."""

    output: Path = output(default=REQUIRED)
    replay: str | None = replay()
    force: bool = option("--force", default=False, kind=bool, help="Write even from a host with error findings.")
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(60.0)
    level: str = option(
        "--level",
        default="static",
        metavar="LEVEL",
        choices=LEVELS,
        help="quick or long: measure, and expect the figures (TD714).",
    )


@dataclass(frozen=True)
class NcclTopoArgs:
    """``nccl-topo``: write NCCL's topology file for the host, or check one against it."""

    output: Path | None = output("Where to write the topology XML ('-' for standard output).")
    lint: Path | None = option(
        "--lint",
        default=None,
        metavar="FILE",
        kind=Path,
        help="Instead, read this topology file as NCCL would and report what it gets wrong here.",
    )
    replay: str | None = replay()
    keep_flat: bool = option(
        "--keep-flat",
        default=False,
        kind=bool,
        help="In a VM whose PCIe tree is flat, leave it flat instead of giving each GPU and its NICs "
        "a switch of their own.",
    )
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(60.0)


@dataclass(frozen=True)
class ConfigArgs:
    """``config``: which settings to show, from which file, and how."""

    command: str | None = argument("COMMAND", default=None)
    fmt: str = fmt(("text", "json"), "text or json.")
    config: Path | None = config_file()
