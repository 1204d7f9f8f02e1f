"""The process a check runs for: its NCCL / CUDA environment, NCCL's config files, its CPUs.

``ProcessEnvironment`` is plain data captured by the probe (``probe/environment.py``) and
recorded beside the NVML answers, so a replay judges the process that was recorded, not the
one replaying it. ``Environment`` is the view the rules read: settings resolved the way NCCL
resolves them (``src/misc/param.cc``): the process environment wins, then the first config
file that sets a name (NCCL_CONF_FILE, or ``$HOME/.nccl.conf`` when it is unset, then
/etc/nccl.conf), and within a file the first line that sets it. NCCL applies the files with
``setenv(name, value, 0)``, which never overwrites, hence "first wins".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.core.text import plural

NCCL_SYSTEM_CONF = "/etc/nccl.conf"
# NCCL copies at most 1023 bytes of a name or value from a config line.
_NCCL_FIELD_MAX = 1023
# The variables NCCL (and the CUDA it runs on) reads: the settings a config file is for, the only
# lines of one that topodoctor shows or records. Any other line of a file a variable names (a
# password file behind NCCL_CONF_FILE) stays on the host: it is counted, never quoted.
SETTING_PREFIXES = ("NCCL_", "CUDA_", "TORCH_NCCL_")
# What a recording holds in place of a config file's line that is not NAME=value, and of the
# value of a variable that is not a setting (NVSHMEM_..., or a password file's "password=...").
WITHHELD = "<a line that is not NAME=value, not kept>"
VALUE_WITHHELD = "<not kept>"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a variable's name as a shell writes one


@dataclass(frozen=True)
class ConfFile:
    """A file NCCL reads settings from; ``text`` is Unsupported("absent") when it does not exist."""

    path: str
    text: Probed[str]


@dataclass(frozen=True)
class ProcessEnvironment:
    """What the probe saw of its process (recorded under "process" in a recording)."""

    environ: dict[str, str]  # NCCL_*, CUDA_*, TORCH_NCCL_*, and the job's GPU scope variables
    conf_files: tuple[ConfFile, ...]  # in the order NCCL applies them (the first to set a name wins)
    topo_file: ConfFile | None  # the file NCCL_TOPO_FILE names, if it is set
    cpu_affinity: Probed[tuple[int, ...]]  # sched_getaffinity of the probing process


class ConfProblem(NamedTuple):
    """A config file NCCL will not read as its author meant: absent, unreadable, or a bad line."""

    path: str
    message: str


def parse_conf(path: str, text: str) -> tuple[list[tuple[str, str]], list[ConfProblem]]:
    """(name, value) pairs in file order, as NCCL's ``setEnvFile`` reads them, and problems.

    NCCL keeps names and values verbatim (no trimming): ``NCCL_DEBUG = INFO`` sets a variable
    called ``"NCCL_DEBUG "`` that nothing reads. Such lines, and lines NCCL skips because they
    hold no ``=``, are problems; only lines that set a real name are returned. A line of a
    setting (``SETTING_PREFIXES``) is quoted where it is wrong; any other line that is not
    ``NAME=value`` (a password file's) is named by its number alone.
    """
    pairs: list[tuple[str, str]] = []
    problems: list[ConfProblem] = []
    foreign: list[int] = []  # the numbers of lines that are not settings: never quoted
    # A text file never holds NUL: this one is binary (a path mix-up). NCCL still applies what
    # looks like NAME=VALUE in it, so it is parsed, but named once, not line by line.
    binary = "\x00" in text
    if binary:
        problems.append(ConfProblem(path, f"{path} is a binary file (it holds NUL bytes), not NCCL settings"))
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if line.startswith("#") or not line.strip():
            continue
        name, eq, value = line.partition("=")
        if not eq and line.lstrip().startswith("#"):  # an indented comment: NCCL skips it too
            continue
        known = name.strip().startswith(SETTING_PREFIXES)
        if not known and not (eq and _NAME.fullmatch(name)):
            foreign.append(n)
            continue
        if not eq:
            problems.append(ConfProblem(path, f"{path}:{n}: not NAME=VALUE, NCCL skips it: {line[:60]!r}"))
            continue
        name, value = name[:_NCCL_FIELD_MAX], value[:_NCCL_FIELD_MAX]
        if name != name.strip() or any(c.isspace() for c in name):
            problems.append(
                ConfProblem(
                    path,
                    f"{path}:{n}: the name {name!r} holds spaces; NCCL sets a variable of exactly that "
                    f"name, so {name.strip()} is not set",
                )
            )
        else:
            pairs.append((name, value))
    settings = any(name.startswith(SETTING_PREFIXES) for name, _ in pairs)
    if foreign and not settings and not problems:
        lines = plural(len(foreign), "line")
        problems.append(ConfProblem(path, f"{path} holds no NCCL setting: {lines} not NAME=value (not shown)"))
    elif foreign:
        problems += [ConfProblem(path, f"{path}:{n}: not NAME=value, not an NCCL setting (not shown)") for n in foreign]
        problems.sort(key=_line_of)
    return pairs, problems[:1] if binary else problems


def _line_of(p: ConfProblem) -> int:
    """The line a problem is at (0: the whole file), for problems in file order."""
    rest = p.message[len(p.path) :]
    head = rest[1:].partition(":")[0] if rest.startswith(":") else ""
    return int(head) if head.isdigit() else 0


def kept_conf(text: str) -> str:
    """What a recording keeps of a config file, line for line: a setting's line
    (``SETTING_PREFIXES``) as it is; another variable NCCL would set, its name with its value
    withheld (``NAME=<not kept>``); any other line ``WITHHELD``; a comment an empty line. A
    binary file stays marked binary. ``parse_conf`` judges it as it judges the file."""
    out = []
    for line in text.split("\n"):
        bare = line.removesuffix("\r")
        name, eq, _ = bare.partition("=")
        if bare.startswith("#") or not bare.strip() or (not eq and bare.lstrip().startswith("#")):
            out.append("")
        elif name.strip().startswith(SETTING_PREFIXES):
            out.append(bare.replace("\x00", ""))
        elif eq and _NAME.fullmatch(name):
            out.append(f"{name}={VALUE_WITHHELD}")
        else:
            out.append(WITHHELD)
    if "\x00" in text:
        out.append("\x00")  # after the last line: the lines keep their numbers
    return "\n".join(out)


@dataclass(frozen=True)
class Environment:
    """NCCL / CUDA settings as NCCL would see them: the process environment over config files."""

    env: dict[str, str]  # variables of the process
    conf: dict[str, str]  # from the config files, resolved as NCCL does (first wins)
    conf_sources: dict[str, str]  # variable -> the file it came from
    conf_errors: tuple[ConfProblem, ...]  # absent (when named), unreadable or malformed config files
    # The process's CPUs; None where no process is judged (a saved bandwidth result).
    process_cpus: Probed[tuple[int, ...]] | None = None
    topo_file: ConfFile | None = field(default=None)  # what NCCL_TOPO_FILE named, as read

    @classmethod
    def of(cls, process: ProcessEnvironment) -> Environment:
        """The settings NCCL would read in this process: its environment over the config files it would
        load, and what is wrong with those files."""
        conf: dict[str, str] = {}
        sources: dict[str, str] = {}
        problems: list[ConfProblem] = []
        named = process.environ.get("NCCL_CONF_FILE")
        for f in process.conf_files:
            if isinstance(f.text, Unsupported):
                if f.path == named:
                    problems.append(
                        ConfProblem(f.path, f"NCCL_CONF_FILE names {f.path}, which does not exist: NCCL ignores it")
                    )
                continue
            if isinstance(f.text, ProbeError):
                problems.append(ConfProblem(f.path, f"{f.path}: could not read: {f.text.error}"))
                continue
            pairs, bad = parse_conf(f.path, f.text)
            problems += bad
            for name, value in pairs:
                if name not in conf:
                    conf[name], sources[name] = value, f.path
        return cls(dict(process.environ), conf, sources, tuple(problems), process.cpu_affinity, process.topo_file)

    def get(self, name: str) -> str | None:
        """The value NCCL would use for ``name``: the environment's, else the config files', else None."""
        if name in self.env:
            return self.env[name]
        return self.conf.get(name)

    def where(self, name: str) -> str:
        """Where ``name``'s value comes from: ``environment`` or the config file that set it."""
        return "environment" if name in self.env else self.conf_sources.get(name, "environment")

    def names(self) -> list[str]:
        """Every variable set, in the environment or a config file, sorted."""
        return sorted(set(self.env) | set(self.conf))
