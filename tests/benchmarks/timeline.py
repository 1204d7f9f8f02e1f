"""Where a command's start-up goes: timestamps of the parent's and the probe child's phases.

    TL_LOG=/tmp/tl.log python3 tests/benchmarks/timeline.py scan       # then read /tmp/tl.log

Each line is ``PID MONOTONIC WHAT``; the first is the process's exec (from /proc), so a phase reads
as milliseconds since exec. The service's functions are wrapped (probe, the child's gather, the
wait, the decode) and an audit hook marks the first import of the modules that weigh most; the
wrapping costs well under a millisecond. docs/benchmarks.md quotes its output (GPU host)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

LOG = os.environ["TL_LOG"]
WATCH = {
    "typer", "rich.console", "rich.table", "pynvml", "topodoctor.cli.commands", "topodoctor.cli.scan",
    "topodoctor.model.snapshot", "topodoctor.probe.nvml", "topodoctor.probe.sources", "topodoctor.probe.collect",
    "topodoctor.report.scan", "topodoctor.topology.view", "topodoctor.rules",
}  # fmt: skip


def mark(what: str) -> None:
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {time.monotonic():.6f} {what}\n")


def _exec_time() -> float:
    with open("/proc/self/stat", "rb") as f:
        started = int(f.read().rsplit(b")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    return time.monotonic() - (time.clock_gettime(time.CLOCK_BOOTTIME) - started)


def _wrap(module: Any, name: str, label: str) -> None:
    real = getattr(module, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mark(f"{label}-start")
        try:
            return real(*args, **kwargs)
        finally:
            mark(f"{label}-end")

    setattr(module, name, wrapped)


def _on_import(event: str, args: Any) -> None:
    if event != "import" or args[0] not in WATCH:
        return
    mark(f"import {args[0]}")


def main() -> None:
    mark(f"exec {_exec_time():.6f}")
    sys.addaudithook(_on_import)
    import topodoctor.service.probing as probing

    for name, label in (("probe", "probe"), ("gather", "gather"), ("await_child", "await"), ("decode", "decode")):
        _wrap(probing, name, label)
    ready = probing._ready_to_decode

    def ready_marked(*args: Any) -> Any:  # the parent's loading while it waits: when it ends
        work = ready(*args)

        def marked() -> None:
            work()
            mark("loaded")

        return marked

    probing._ready_to_decode = ready_marked  # type: ignore[assignment]
    real_exit = os._exit

    def leave(code: int) -> None:
        mark(f"exit {code}")
        real_exit(code)

    os._exit = leave  # type: ignore[assignment]
    sys.argv = ["topodoctor", *sys.argv[1:]]
    from topodoctor.cli import run

    run()


if __name__ == "__main__":
    main()
