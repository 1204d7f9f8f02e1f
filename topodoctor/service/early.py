"""The probe of a ``check`` or ``scan``, started before the command line is even parsed.

A static check is two halves that need each other only at the end: the probe (NVML and sysfs,
in its budgeted child) and the parent's own loading (the command line library, the rules).
Forked after parsing, the child waits for the parent's imports; forked first, the two overlap,
and a live check answers a tenth of a second sooner on the GPU hosts, in every prolog.

So the console entry point reads the arguments the way the command will, before any other
import, and starts the probe it will ask for. The command adopts that child only when it asks
for the same host the same way (service/probing.py forks it and adopts it): an argument read
differently here, a pass to run in the child, ``--timeout 0`` (no child at all) or a usage
error only cost the child, which is killed."""

from __future__ import annotations

from topodoctor.service.passes import Source

# The options of `check` and `scan` that change neither which host is probed nor how: what
# they change happens in the parent, after the probe. Any other option, a help request
# included, means no early probe.
_VALUE_OPTIONS = {
    "check": {"--format", "-f", "--metrics", "--timeout", "--select", "--ignore", "--fail-level", "--expect"}
    | {"--baseline", "--scope"},
    "scan": {"--format", "-f", "--export-graph", "--draw", "--timeout"},
}
_FLAGS = {"check": {"--prolog", "--strict"}, "scan": set()}
_SOURCE_OPTIONS = {"--replay": "replay", "--sysfs-root": "sysfs_root"}


def source_of(argv: list[str]) -> Source | None:
    """The host a ``check`` or ``scan`` command line will probe without a measurement pass, or
    None when it may do anything else (another command, a pass, a help request, no budget)."""
    if not argv or argv[0] not in _VALUE_OPTIONS:
        return None
    command, words = argv[0], iter(argv[1:])
    found: dict[str, str] = {}
    for word in words:
        name, attached, value = word.partition("=")
        if not attached and name.startswith("-f") and len(name) > 2 and "-f" in _VALUE_OPTIONS[command]:
            continue  # -fjson: the format, attached
        if name in _FLAGS[command] and not attached:
            continue
        if name in _VALUE_OPTIONS[command] or name in _SOURCE_OPTIONS:
            if not attached:
                got = next(words, None)
                if got is None:
                    return None
                value = got
            if name == "--timeout" and value.strip() in ("0", "0.0", "0s"):
                return None  # no budget: everything runs in this process, as --timeout 0 promises
            if name in _SOURCE_OPTIONS:
                if _SOURCE_OPTIONS[name] in found:
                    return None  # given twice: the command refuses it
                found[_SOURCE_OPTIONS[name]] = value
            continue
        return None
    return Source(found.get("replay"), found.get("sysfs_root", "/"))
