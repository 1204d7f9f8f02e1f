"""What `nccl-log` reads out of one file, as plain data: the lines that matter (``Event``) and
what the whole file says (``LogFile``). ``nccl.parse`` fills them; the explainer reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from topodoctor.model.nccl_account import NcclAccount
from topodoctor.nccl.choices import Choices
from topodoctor.nccl.classify import ROOT
from topodoctor.nccl.tests_run import TestsRun

Level = Literal["unset", "VERSION", "WARN", "INFO"]


@dataclass(frozen=True)
class Event:
    """A line that says something went wrong (or, ``ib-no-device``, may go wrong)."""

    kind: str  # a ``classify`` kind, or: warn (an unread WARN), nccl-error, trail, ib-no-device, diag
    file: str
    line_no: int  # 1-based
    text: str  # the line, trimmed to 300 characters
    fields: dict[str, str] = field(default_factory=dict)  # what the message names (status, call, errno...)
    rank: int | None = None
    source: str = ""  # the NCCL source file the line was printed from, where the line says
    order: int = ROOT  # ROOT or CONSEQUENCE (``nccl.classify``)
    host: str = ""  # the host of NCCL's line prefix ("" where the line carries none)


# event kinds that are no failure by themselves: a WARN no class reads, an IB device absent, NCCL's DIAG, a known
# bug's INFO sign; and the post's own words that the run failed, which give way to any failure a file shows
NOT_FAILURES = frozenset(("warn", "ib-no-device", "diag", "bug-symptom"))
WORDS_ONLY = NOT_FAILURES | {"said-failed"}


@dataclass(frozen=True)
class Sign:
    """An INFO line that tells one cause of a failure class from another (``nccl.info_signs`` reads them)."""

    # gid, ib-lid, cumem-import, mmap-import, cumem-host-fails, net-plugin, no-net-plugin, ofi-provider,
    # multi-gpu-process, at-destroy, no-gdrdma, gid-listed (a pasted GID table or sentence: nccl.gid_lines),
    # no-verbs (libibverbs could not be loaded), host-address (the interface and address a host's sockets use)
    # shm-size (a pasted `df` row of /dev/shm, value: bytes), nccl-wheel (a pasted package listing's NCCL wheel)
    kind: str
    host: str  # the host of NCCL's line prefix ("" where the line carries none)
    value: str  # what it names: "3 ::ffff:10.0.0.1" (GID index and GID), the plugin, the provider
    said: str  # the message, trimmed: what a fix quotes


@dataclass(frozen=True)
class LogFile:
    """What one file says."""

    name: str
    level: Level  # how much NCCL said: the most verbose kind of line seen
    versions: tuple[str, ...]  # NCCL versions named (banners and torch's error text)
    ranks: tuple[int, ...]  # ranks the file speaks for
    hosts: tuple[str, ...]  # hosts in NCCL's line prefix (host:pid:tid)
    events: tuple[Event, ...]
    last_errors: tuple[str, ...]  # what followed torch's "Last error:" ("" when NCCL left none)
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* NCCL reported as set (INFO)
    account: NcclAccount | None = None  # transports, channels, nodes (INFO)
    choices: Choices | None = None  # cost table, graphs, per-call algorithms (INFO + TUNING)
    nccl_tests: bool = False  # nccl-tests' own output (its "# nThread" header)
    failed: bool = False  # the file shows a failed call: a trail to the top, a framework or test error
    went_on: bool = False  # work went on after the last failure line (training steps, test rows)
    worked_first: bool = False  # work made progress before the first failure line: the failure came mid-run
    # host -> RDMA device -> IB or RoCE (NET/IB : Using); host "" for a line without NCCL's prefix
    link_layers: dict[str, dict[str, str]] = field(default_factory=dict)
    socket_ifs: dict[str, str] = field(default_factory=dict)  # interface -> address NCCL's sockets use
    gpu_names: tuple[str, ...] = ()  # consumer GPU names the log shows (nccl-tests' device list, torch)
    topo_file: str = ""  # the topology XML NCCL loaded, where the log says
    trail_sources: tuple[str, ...] = ()  # NCCL source files of the return-code trail (bootstrap.cc, ...)
    # NCCL_* the log shows set (NCCL's "set by environment to", a command line, an export): name, value, line
    variables: tuple[tuple[str, str, int], ...] = ()
    signs: tuple[Sign, ...] = ()  # INFO lines that tell a class's causes apart (GIDs, cuMem imports, the plugin)
    # a line of NCCL, torch.distributed, the linker on libnccl or XLA's NCCL of any kind: NCCL output at all
    speaks: bool = True
    launch_nodes: int | None = None  # the nodes a launch line in the file asks for (torchrun --nnodes 2, ...)
    # a launch line that starts more processes per node than the GPUs it leaves visible, as written
    overcommit: str = ""
    # NCCL versions the text names in words (an environment list, a title, pip): read where no banner names one
    said_versions: tuple[str, ...] = ()
    tests: TestsRun = field(default_factory=TestsRun)  # the nccl-tests run the file shows (its op, sizes, -g)


def running_versions(f: LogFile) -> tuple[str, ...]:
    """The NCCL versions a file's run uses: its banners', else those its words name."""
    return f.versions or f.said_versions


def dedupe_versions(found: dict[str, None]) -> list[str]:
    """``2.28.9`` (torch's error text) and ``2.28.9+cuda13.0`` (NCCL's banner) are one version; old
    torch's ``21.1.4`` is 2.11.4."""
    full = list(dict.fromkeys(torch_version(v) for v in found))
    return [v for v in full if not any(o != v and o.startswith(v + "+") for o in full)]


def torch_version(v: str) -> str:
    """The NCCL version torch's error names: torch before 1.10 split NCCL's version code 21104 (2.11.4) as
    if it were 2104, printing ``21.1.4``; read back, that is 2.11.4."""
    parts = v.split("+")[0].split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[0]) < 10:
        return v
    code = int(parts[0]) * 1000 + int(parts[1]) * 100 + int(parts[2])
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
