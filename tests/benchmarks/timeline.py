"""Where a command's start-up goes: each process's phases, in milliseconds since the command's exec.

    python3 tests/benchmarks/timeline.py 9 scan          # 9 runs of `topodoctor scan`, the medians

Times count from the spawn (the runner's clock just before it starts the command), so "P main"
is the interpreter's own start-up.

The command runs as the console entry point runs it; nothing of topodoctor loads before its own
code asks for it (an import hook wraps the watched functions as their modules load), so the
child's fork comes where it comes in a real run. Processes are named by their fork: P the
command, C the probe's child. Marks: the first import of the modules that weigh most, the
driver's warm-up in the child (``ctypes`` calls), the parent's wait, its loading meanwhile and
its drawing, and ``os._exit``. Each mark is one ``write`` to an O_APPEND file (a few microseconds).
docs/benchmarks.md quotes its output (GPU host)."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

WATCH = {
    "typer", "rich.console", "rich.table", "pynvml", "ctypes", "topodoctor.core.options", "topodoctor.cli.scan",
    "topodoctor.model.snapshot", "topodoctor.probe.nvml", "topodoctor.probe.collect", "topodoctor.report.scan",
    "topodoctor.topology.view", "topodoctor.rules", "typer.main",
}  # fmt: skip
# module -> (function or Class.method, label)
WRAP = {
    "topodoctor.probe.warm_up": [("warm_driver", "warm-thread"), ("WarmUp.join", "warm-join")],
    "topodoctor.service.probing": [("await_child", "await"), ("gather", "gather"), ("scan_text_of", "text")],
    "topodoctor.cli.scan": [("load_scan_text", "meanwhile"), ("load_scan_report", "meanwhile")],
    "topodoctor.report.scan_text": [("print_scan_text", "draw")],
    "topodoctor.report.scan": [("print_scan", "draw")],
    "topodoctor.core.budget": [("end_children", "end-children")],
}
_fd = -1
_role = "P"
_ctypes_calls = 0


def mark(what: str) -> None:
    os.write(_fd, f"{_role} {time.monotonic():.6f} {what}\n".encode())


def _wrapped(real: Any, label: str) -> Any:
    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(f"{label}>")
        try:
            return real(*args, **kwargs)
        finally:
            mark(f"{label}<")

    return wrapper


class _Patcher(importlib.abc.MetaPathFinder):
    """Wraps WRAP's functions once their module has run."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in WRAP:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            for dotted, label in WRAP[name]:
                owner: Any = module
                *parents, attr = dotted.split(".")
                for p in parents:
                    owner = getattr(owner, p)
                setattr(owner, attr, _wrapped(getattr(owner, attr), label))

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _on_event(event: str, args: Any) -> None:
    global _ctypes_calls
    if event == "import" and args[0] in WATCH:
        mark(f"import {args[0]}")
    elif event == "ctypes.dlopen":
        mark("dlopen")
    elif event == "ctypes.call_function":
        _ctypes_calls += 1
        mark(f"ctypes call {_ctypes_calls}")


def _fork() -> int:
    global _role
    forker = sys._getframe(1).f_globals.get("__name__", "")
    pid = _real_fork()
    if pid == 0:
        _role = {"topodoctor.core.budget": "C"}.get(forker, "F")
        mark("born")
    return pid


_real_fork = os.fork
_real_exit = os._exit


def _exit(code: int) -> None:
    mark(f"exit {code}")
    _real_exit(code)


def child_main(log: str, spawned: str, argv: list[str]) -> None:
    """One run, as ``topodoctor ARGV``, marking into ``log``; ``spawned``: the monotonic clock
    when the runner spawned it (the /proc start time counts in 10 ms ticks)."""
    global _fd
    _fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(_fd, f"P {spawned} exec\n".encode())
    mark("main")
    sys.addaudithook(_on_event)
    sys.meta_path.insert(0, _Patcher())
    os.fork = _fork
    os._exit = _exit  # type: ignore[assignment]
    sys.argv = ["topodoctor", *argv]
    from topodoctor.cli import run

    run()


def read_run(log: str) -> dict[str, float]:
    """Each mark's first time, and the ask count, in ms since the exec."""
    out: dict[str, float] = {}
    t0 = None
    asks: dict[str, int] = defaultdict(int)
    with open(log) as f:
        for line in f:
            role, t, what = line.rstrip("\n").split(" ", 2)
            if what == "exec":
                t0 = float(t)
                continue
            assert t0 is not None
            ms = (float(t) - t0) * 1e3
            if what.startswith("ask"):
                asks[f"{role} {what}"] += 1
                out[f"{role} {what} last"] = ms
            out.setdefault(f"{role} {what}", ms)
    for key, n in asks.items():
        out[f"{key} count"] = n
    return out


def main() -> None:
    if sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    runs, argv = int(sys.argv[1]), sys.argv[2:]
    got: dict[str, list[float]] = defaultdict(list)
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(runs + 1):  # the first pages the files in
            log = os.path.join(tmp, f"{n}.log")
            t = time.monotonic()
            subprocess.run([sys.executable, __file__, "--child", log, f"{t:.6f}", *argv], stdout=subprocess.DEVNULL)
            if n:
                walls.append((time.monotonic() - t) * 1e3)
                for key, ms in read_run(log).items():
                    got[key].append(ms)
    rows = sorted(((statistics.median(v), k, len(v)) for k, v in got.items() if not k.endswith("count")))
    print(f"{runs} runs of topodoctor {' '.join(argv)}: wall median {statistics.median(walls):.1f} ms")
    for ms, key, n in rows:
        count = got.get(f"{key} count")
        extra = f"  (x{statistics.median(count):.0f})" if count else ""
        print(f"{ms:8.1f}  {key}{extra}" + ("" if n == runs else f"  [{n} runs]"))


if __name__ == "__main__":
    main()
