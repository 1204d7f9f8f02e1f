"""The one table of NCCL's variables: which releases read each, its type and default as NCCL's source
spells them, what leaving it unset means, and (``nccl.guide``) for the ones users set, meaning, harm
and fix.

The releases come from NCCL's own source at every release tag 2.18.1 - 2.30.7
(``data/variables.json``, written by ``fixtures/nccl_variables_extract.py``: NCCL_PARAM, the 2.30 param
registry, ``ncclGetEnv`` / ``getenv``, ``ncclGetLevel``); the file is read once, on first use,
never the source at run time. ``check``'s lint (rules/nccl_env.py), the cause engine and the log
reader read this module.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

Version = tuple[int, int, int]
_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")
# NCCL_VERSION_CODE as ncclGetVersion and an older torch.cuda.nccl.version() give it: X*10000 + Y*100 + Z
# from 2.9 (22803), X*1000 + Y*100 + Z before (2708)
_VERSION_CODE = re.compile(r"^\s*(\d{4,5})\s*$")

# Read by NCCL releases before 2.18 (the table's first), gone since: no "unknown" warning for them.
EARLIER = frozenset({"NCCL_NCHANNELS_PER_PEER"})
# NCCL_* names that are not NCCL settings: container images (NCCL_VERSION in NVIDIA's CUDA
# images) and build systems (PyTorch's setup reads NCCL_ROOT and friends) set them.
NOT_SETTINGS = frozenset(
    [
        "NCCL_VERSION",
        "NCCL_HOME",
        "NCCL_ROOT",
        "NCCL_ROOT_DIR",
        "NCCL_INCLUDE_DIR",
        "NCCL_LIB_DIR",
        "NCCL_LIBRARY",
        "NCCL_PKG_VERSION",
    ]
)
# Read by the IB / SHARP network plugin NVIDIA ships beside NCCL (Mellanox/nccl-rdma-sharp-plugins v1.0 -
# v2.1.0, its NCCL_PARAM and getenv sites), not by the library: real names (a log or a host sets them for
# the plugin), which no NCCL release's table holds.
NET_PLUGIN = frozenset(
    {
        "NCCL_GDR_FLUSH_DISABLE",
        "NCCL_IBEXT_DISABLE",
        "NCCL_IB_AR_THRESHOLD",
        "NCCL_IB_IS_GLOBAL",
        "NCCL_IB_USE_INLINE",
        "NCCL_PLUGIN_P2P",
        "NCCL_SHARP_MAX_COMMS",
        "NCCL_UCX_DISABLE",
        "NCCL_UCX_RMA_DISABLE",
        "NCCL_UCX_TLS",
        "NCCL_UCX_ZCOPY_THRESH",
    }
)
# Removed or renamed: what to use instead.
DEPRECATED = {
    "NCCL_MAX_RINGS": "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NRINGS": "NCCL_MIN_NCHANNELS",
    "NCCL_RINGS": "nothing: NCCL builds its own rings",
    "NCCL_SINGLE_RING_THRESHOLD": "nothing: removed in NCCL 2.4",
    "NCCL_LL_THRESHOLD": "NCCL_PROTO, and only to debug",
    "NCCL_TREE_THRESHOLD": "NCCL_ALGO, and only to debug",
    "NCCL_IB_CUDA_SUPPORT": "NCCL_NET_GDR_LEVEL",
    "NCCL_CHECKS_DISABLE": "nothing: removed in NCCL 2.2.12",
    "NCCL_WORK_FIFO_DEPTH": "NCCL_WORK_FIFO_BYTES",
    "NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING (PyTorch renamed it)",
    "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT (PyTorch renamed it)",
    "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG (PyTorch renamed it)",
}
# Settings NCCL documents as for debugging only: kept in production they cost speed or stability.
DEBUG_ONLY = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_NTHREADS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_CHECK_POINTERS",
    "NCCL_LAUNCH_MODE",
    "NCCL_BUFFSIZE",
    "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_NVB_DISABLE",
    "NCCL_PXN_DISABLE",
    "NCCL_GRAPH_MIXING_SUPPORT",
    "NCCL_RUNTIME_CONNECT",
)


def parse_version(text: str) -> Version | None:
    """``2.28.9``, ``2.28.9+cuda12.4``, ``2.28.3-1`` (NVIDIA images' NCCL_VERSION), ``v2.28.9-1``
    (a tag), ``2.28``, ``22809`` (NCCL's version code) -> (2, 28, 9) ...; None when the text holds no version."""
    m = _VERSION.match(text)
    if m:
        return (int(m[1]), int(m[2]), int(m[3] or 0))
    if code := _VERSION_CODE.match(text):
        n = int(code[1])
        return (n // 10000, n // 100 % 100, n % 100) if n >= 10000 else (n // 1000, n // 100 % 10, n % 100)
    return None


def shown(v: Version) -> str:
    """(2, 28, 9) -> "2.28.9"."""
    return ".".join(str(n) for n in v)


@dataclass(frozen=True)
class Variable:
    """One variable as NCCL's source reads it."""

    name: str
    type: str  # int64 (NCCL_PARAM: strtoll), string (NCCL parses it), level (ncclGetLevel), or a 2.30 type
    default: str  # as the source spells it; "" where NCCL's own code decides when it is unset
    releases: tuple[tuple[Version, Version], ...]  # runs of consecutive releases that read it
    files: tuple[str, ...]  # NCCL source files that read it
    plugin: bool = False  # read only by an example plugin or contributed tool NCCL ships beside the library

    def read_by(self, version: Version) -> bool:
        """Whether the table's release ``version`` (one of ``releases()``) reads this variable."""
        return any(lo <= version <= hi for lo, hi in self.releases)

    @property
    def span(self) -> str:
        """The releases that read it, in words: "2.18.1 - 2.28.3 and 2.30.7"."""
        runs = [shown(lo) if lo == hi else f"{shown(lo)} - {shown(hi)}" for lo, hi in self.releases]
        return " and ".join(runs)

    @property
    def unset(self) -> str:
        """What leaving the variable unset means."""
        if self.type == "level":
            return "NCCL picks the path level itself from the topology"
        if self.type == "string" or not self.default:
            return "NCCL's own choice (it reads no value)"
        try:
            n = int(self.default, 0)
        except ValueError:
            return f"the source's default {self.default}"
        if n < 0:  # NCCL_PARAM's -1 / -2: "not set", resolved at run time from the platform
            return f"NCCL decides at run time (the source's default is {n}, meaning not set)"
        return f"{n}, the source's default"


def _version_of_tag(tag: str) -> Version:
    v = parse_version(tag)
    assert v is not None, tag  # the generator writes release tags only
    return v


@cache
def _data() -> dict[str, Any]:
    text = resources.files("topodoctor.nccl").joinpath("data").joinpath("variables.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _variable(name: str, entry: dict[str, Any], plugin: bool) -> Variable:
    runs = tuple((_version_of_tag(lo), _version_of_tag(hi)) for lo, hi in entry["releases"])
    return Variable(name, entry["type"], entry["default"], runs, tuple(entry["files"]), plugin)


@cache
def table() -> dict[str, Variable]:
    """Every NCCL_* variable NCCL 2.18.1 - 2.30.7 or its shipped plugins read, by name."""
    d = _data()
    out = {n: _variable(n, e, False) for n, e in d["variables"].items()}
    out.update({n: _variable(n, e, True) for n, e in d["plugins"].items()})
    return out


@cache
def releases() -> tuple[Version, ...]:
    """The releases the table was read from, oldest first."""
    return tuple(_version_of_tag(t) for t in _data()["releases"])


def counts() -> dict[Version, int]:
    """How many NCCL_* variables each release's library reads (plugins left out)."""
    return {_version_of_tag(t): n for t, n in _data()["counts"].items()}


def read_in(release: Version) -> frozenset[str]:
    """The variables a release of the table reads (its library and its shipped plugins)."""
    return frozenset(n for n, v in table().items() if v.read_by(release))


@cache
def integers() -> frozenset[str]:
    """Variables NCCL parses as integers with strtoll (NCCL_PARAM), in some release."""
    return frozenset(n for n, v in table().items() if v.type == "int64")


@cache
def known() -> frozenset[str]:
    """Every name NCCL reads or read: the table, the releases before it, removed names, and the names its
    IB / SHARP network plugin reads."""
    return frozenset(table()) | EARLIER | frozenset(DEPRECATED) | NET_PLUGIN


@dataclass(frozen=True)
class Judged:
    """A version of NCCL, as the table can judge it."""

    version: Version | None  # what the job runs; None when not known
    release: Version | None  # the table's release it is judged as; None: judge against every release
    note: str  # how: "", or why the judgement is looser ("newer than the table's last release")


def judge_as(version: Version | None) -> Judged:
    """The table's release a version is judged as: itself, the latest release before it of the
    same minor, the last release for a newer NCCL; none (every release at once) for an older one."""
    rel = releases()
    if version is None:
        return Judged(None, None, "the job's NCCL version is not known")
    if version > rel[-1]:
        return Judged(version, rel[-1], f"newer than the table's last release, {shown(rel[-1])}: judged as that")
    if version < rel[0]:
        return Judged(version, None, f"older than the table's first release, {shown(rel[0])}")
    same = [r for r in rel if r <= version and r[:2] == version[:2]]
    if same:
        return Judged(version, same[-1], "" if same[-1] == version else f"judged as {shown(same[-1])}")
    before = max(r for r in rel if r <= version)
    return Judged(version, before, f"not a release the table holds: judged as {shown(before)}")
