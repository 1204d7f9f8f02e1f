"""Capturing the process environment: NCCL / CUDA variables, NCCL's config files, CPU affinity.

This runs inside the probe (under its budget) so that rules read data and never open files.
The files are named by the user (NCCL_CONF_FILE, NCCL_TOPO_FILE) and may be anything: a FIFO,
``/dev/zero``, a file on a hung mount. They are read through ``fileio`` (regular files only,
bounded in size and time); a file that cannot be read becomes a ``ProbeError`` value, never a
hang or a crash.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from topodoctor.core import codec
from topodoctor.core.errors import InputError
from topodoctor.core.fileio import MiB, read_bytes
from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.environment import (
    NCCL_SYSTEM_CONF,
    SETTING_PREFIXES,
    ConfFile,
    Environment,
    ProcessEnvironment,
    kept_conf,
)

PREFIXES = SETTING_PREFIXES
# What the scheduler gave the job: the GPUs a check in a prolog is about, the job it is for
# (topology/scope.py), and which of Slurm's scripts runs the check (SLURM_SCRIPT_CONTEXT:
# prolog_slurmd, epilog_slurmd).
JOB_SCOPE = ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "SLURM_SCRIPT_CONTEXT")
CONF_MAX_BYTES = 1 * MiB  # NCCL reads lines of < 4 kB; a config file of a megabyte is not one
TOPO_MAX_BYTES = 16 * MiB  # NCCL's own topology dump of a large host is well under a megabyte
READ_TIMEOUT_S = 2.0


def read_setting_file(path: str, max_bytes: int) -> Probed[str]:
    """A config file's text; Unsupported("absent") when missing; ProbeError when unreadable."""
    try:
        data = read_bytes(path, "file", max_bytes=max_bytes, timeout_s=READ_TIMEOUT_S)
    except InputError as exc:
        # Told apart by fileio's message: a second look (stat) could hang on a wedged mount.
        if str(exc) == f"file not found: {path}":
            return Unsupported("absent")
        return ProbeError(str(exc).replace(f": {path}", "").replace(f" {path}", ""), f"read {path}")
    # NCCL reads bytes; undecodable ones must not stop the lint of the rest of the file.
    return data.decode("utf-8", errors="replace")


def kept_topology(text: Probed[str]) -> Probed[str]:
    """What is kept of the file NCCL_TOPO_FILE names: its text where it is NCCL's topology XML (a
    top element ``<system>``), else why NCCL cannot use it, without a word of the file: a file of
    anything else (a password file) never reaches a finding or a recording."""
    if not isinstance(text, str):
        return text
    import xml.etree.ElementTree as ET  # the XML parser (6 modules): only where a topology file is named

    why = None
    if "<!DOCTYPE" in text or "<!ENTITY" in text:  # refused before parsing: no entity is expanded here
        why = "holds a DTD, which NCCL's parser refuses"
    else:
        try:
            if ET.fromstring(text).tag != "system":
                why = "is XML, but its top element is not NCCL's <system>"
        except ET.ParseError as exc:
            why = f"is not well-formed XML ({exc})"
    if why is None:
        return text
    return ProbeError(f"not an NCCL topology file: {why}; its text is not kept", "read NCCL_TOPO_FILE")


def conf_paths(environ: Mapping[str, str], system_conf: str = NCCL_SYSTEM_CONF) -> list[str]:
    """The config files NCCL reads, in the order it applies them (``initEnvFunc``)."""
    if environ.get("NCCL_CONF_FILE"):
        first = environ["NCCL_CONF_FILE"]
    elif environ.get("HOME"):
        first = os.path.join(environ["HOME"], ".nccl.conf")
    else:
        return [system_conf]
    return [first, system_conf]


def _kept(text: Probed[str]) -> Probed[str]:
    return kept_conf(text) if isinstance(text, str) else text


def cpu_affinity() -> Probed[tuple[int, ...]]:
    """The CPUs this process may run on (``sched_getaffinity``; ``taskset -p $$``)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:
        return Unsupported("no sched_getaffinity on this platform")
    except OSError as exc:
        return ProbeError(exc.strerror or type(exc).__name__, "sched_getaffinity")


def capture_process(
    environ: Mapping[str, str] | None = None,
    system_conf: str = NCCL_SYSTEM_CONF,
    affinity: Probed[tuple[int, ...]] | None = None,
) -> ProcessEnvironment:
    """The process environment as NCCL in this process would see it."""
    env = dict(os.environ if environ is None else environ)
    kept = {k: v for k, v in env.items() if k.startswith(PREFIXES) or k in JOB_SCOPE}
    files = tuple(ConfFile(p, _kept(read_setting_file(p, CONF_MAX_BYTES))) for p in conf_paths(env, system_conf))
    # The topology file may be set in a config file too: NCCL reads it after applying them.
    topo_path = env.get("NCCL_TOPO_FILE") or Environment.of(ProcessEnvironment(kept, files, None, ())).get(
        "NCCL_TOPO_FILE"
    )
    topo = ConfFile(topo_path, kept_topology(read_setting_file(topo_path, TOPO_MAX_BYTES))) if topo_path else None
    return ProcessEnvironment(kept, files, topo, cpu_affinity() if affinity is None else affinity)


def capture_environment(environ: Mapping[str, str] | None = None, system_conf: str = NCCL_SYSTEM_CONF) -> Environment:
    """The rules' view of this process (``capture_process`` then ``Environment.of``)."""
    return Environment.of(capture_process(environ, system_conf))


NOT_RECORDED = ProbeError("not recorded", "sched_getaffinity")


def replayed_process(data: Any, name: str) -> ProcessEnvironment:
    """The process of a replayed recording (its "process" key, ``data``; None when it has none).

    A recording holds the process environment and the CPU affinity of the process that made it,
    and a replay judges that process, never the replaying one. Recordings made before the
    process was captured may hold only ``cpu_affinity`` or nothing: their environment and config
    files are then the replaying process's (so a variable set for the replay is still linted),
    and an affinity they lack is a probe failure ("not recorded"), never this machine's.
    """
    what = f"recording {name}: process"
    if data is None:
        return capture_process(affinity=NOT_RECORDED)
    if not isinstance(data, dict):
        raise InputError(f"{what} is not an object")
    if "environ" in data:
        return codec.from_jsonable(ProcessEnvironment, data, what)
    if "cpu_affinity" not in data:
        raise InputError(f"{what} holds neither environ nor cpu_affinity")
    affinity = codec.from_jsonable(ProcessEnvironment, dict(data, environ={}, conf_files=[], topo_file=None), what)
    return capture_process(affinity=affinity.cpu_affinity)
