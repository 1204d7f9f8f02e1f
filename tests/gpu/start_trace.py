"""Where a command's start-up goes, process by process: runs ``python3 -m topodoctor ARGS`` (of the
tree in the current directory) under an audit hook that writes, for the command and every process
it forks, when each module loaded, each fork, each library opened (libnvidia-ml, libcuda) and the
first few reads and writes of each pipe (and every large one), in seconds since this script's first instruction.

    python3 tests/gpu/start_trace.py TRACE_FILE scan
    python3 tests/gpu/start_trace.py TRACE_FILE check -f line

Each line: ``seconds pid event detail``. A forked child keeps the hook and writes its own lines
(appended, one ``os.write`` each, so lines of two processes never mix). Measured on the GPU hosts
to compare the start of two trees (tests/gpu/house_ab_host.sh); the hook costs a few percent.
"""

from __future__ import annotations

import os
import sys
import time

T0 = time.monotonic()
PATH = os.path.abspath(sys.argv[1])
_seen: dict[tuple[int, int, str], int] = {}
_real_read, _real_write, _real_fork = os.read, os.write, os.fork


def _note(event: str, detail: str = "") -> None:
    # opened for each line: a child that closes every inherited descriptor (a forked server or
    # timer does) must neither lose its lines nor write them into a pipe that took the number
    fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        _real_write(fd, f"{time.monotonic() - T0:.4f} {os.getpid()} {event} {detail}\n".encode())
    finally:
        os.close(fd)


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event == "import":
        _note("import", str(args[0]))
    elif event == "ctypes.dlopen":
        _note("dlopen", str(args[0]))
    elif event == "os.fork":
        _note("fork")


def _first(kind: str, fd: int, n: int) -> bool:
    key = (os.getpid(), fd, kind)
    _seen[key] = _seen.get(key, 0) + 1
    return _seen[key] <= 3 or n > 4096


def _read(fd: int, n: int) -> bytes:
    t = time.monotonic()
    data = _real_read(fd, n)
    if fd > 2 and _first("read", fd, len(data)):
        _note("read", f"fd={fd} bytes={len(data)} waited={time.monotonic() - t:.4f}")
    return data


def _write(fd: int, data: bytes) -> int:  # type: ignore[override]
    if fd > 2 and _first("write", fd, len(data)):
        _note("write", f"fd={fd} bytes={len(data)}")
    return _real_write(fd, data)


def _fork() -> int:
    pid = _real_fork()
    if pid == 0:
        _note("child-start", f"parent={os.getppid()}")
    return pid


def main() -> None:
    """Trace ``python3 -m topodoctor`` with the arguments after the trace file."""
    sys.addaudithook(_hook)
    os.read, os.write, os.fork = _read, _write, _fork  # type: ignore[assignment]
    sys.argv = ["topodoctor", *sys.argv[2:]]
    sys.path.insert(0, os.getcwd())
    _note("start", " ".join(sys.argv[1:]))
    import atexit
    import runpy

    atexit.register(lambda: _note("exit"))
    runpy.run_module("topodoctor", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
