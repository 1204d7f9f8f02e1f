"""The NVML server a live probe's child adopts (probe/nvml_server.py), started by the console
entry point before it loads anything else: the binding's import and the driver's first answers
then overlap all of the command's own start-up, the probe's child's included. Nothing here is
loaded by a command that starts no server."""

from __future__ import annotations

_started = False


def start_nvml_server() -> None:
    """Start the server for the probe's child to adopt (``hand_to``), or to kill (``drop``)."""
    global _started
    from topodoctor.probe import nvml_server

    nvml_server.start_early()
    _started = True


def hand_to(child: int) -> None:
    """The probe's child, just forked, has the server: it joins that child's process group."""
    global _started
    if _started:
        from topodoctor.probe import nvml_server

        nvml_server.hand_over(child)
        _started = False


def drop() -> None:
    """Kill a server no probe's child adopted."""
    global _started
    if _started:
        from topodoctor.probe import nvml_server

        nvml_server.drop_early()
        _started = False
