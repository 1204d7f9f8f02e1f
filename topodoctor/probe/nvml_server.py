"""The live NVML binding in a process of its own, answering the probe's calls through a pipe.

A probe's child that loads pynvml and meets the driver itself does both on the one interpreter
that also loads the model and the probe: on the GPU hosts the binding's import (13-18 ms) and
the driver's first answers (about 40 ms, probe/warm_up.py) then sit on the probe's critical path
beside the model's 20-30 ms. A server started first does the binding and the driver while the
probe's process loads the rest, and the probe's calls then cross a pipe (0.1-0.4 ms a round
trip; the calls the probe makes whatever the answers go ahead in batches, ``ask_ahead``). The
boundary is the one the recorder and the replay already use (``NvmlApi``: plain arguments in,
plain data or an NVML code out), so the probe runs unchanged.

The console entry point starts one before it loads anything else (``start_early``): the probe's
child forked after it inherits its pipes and adopts it (``adopt``), and the entry point hands
it over (``hand_over``: the server joins the child's process group, which the budget kills
whole). A server nobody adopts is killed (``drop_early``). It always dies with its parent."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topodoctor.probe.api import NvmlApi
    from topodoctor.probe.warm_up import WarmUp

# The entry point loads this module before it forks the server, so it loads only what the fork
# needs: the server starts its driver first (``_serve_forked``) and loads the rest (json, the
# NVML boundary's errors, the signals) while the driver answers; the client loads them when it
# asks (the command has loaded json and the signals by then).


class NvmlServer:
    """``NvmlApi`` over a live binding in a forked server process (``start``)."""

    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid = pid
        self._requests = os.fdopen(requests, "w", encoding="utf-8")
        self._answers = os.fdopen(answers, encoding="utf-8")
        self._ahead: dict[str, list[dict[str, Any]]] = {}  # answers asked ahead, by call

    @classmethod
    def start(cls, backend: Callable[[], NvmlApi] | None = None) -> NvmlServer:
        """Fork the server; it loads the binding and warms the driver up at once (``backend``:
        another NvmlApi to serve, a replay's in tests). Fork it before any thread starts here:
        forking a process with threads is unsafe."""
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(requests_write)
                os.close(answers_read)
                _serve_forked(parent, requests_read, answers_write, backend)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(requests_read)
        os.close(answers_write)
        return cls(pid, requests_write, answers_read)

    def call(self, fn: str, *args: Any) -> Any:
        """Make one NVML call in the server (or take its answer asked ahead); plain data, or
        NvmlCallError with NVML's code."""
        import json

        key = json.dumps([fn, list(args)])
        waiting = self._ahead.get(key)
        return _answered(waiting.pop(0) if waiting else self._ask(key))

    def ask_ahead(self, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Make these calls in the server in one round trip; each answer waits for the probe's own
        call of it (the pair queries: eight a pair, each a round trip otherwise)."""
        if not calls:
            return
        import json

        keys = [json.dumps([fn, list(args)]) for fn, args in calls]
        for key, answer in zip(keys, self._ask(json.dumps({"many": keys})), strict=True):
            self._ahead.setdefault(key, []).append(answer)

    def _ask(self, request: str) -> Any:
        import json

        from topodoctor.core.errors import ProbeUnavailable

        self._requests.write(request + "\n")
        self._requests.flush()
        line = self._answers.readline()
        if not line:
            raise ProbeUnavailable("the NVML server process died without an answer (a crash in the driver?)")
        return json.loads(line)

    def close(self) -> None:
        """Let go of the server's pipes: the last holder's close ends it (it reads the end of its
        requests and exits; not waited for, its teardown of the driver is its own time)."""
        for stream in (self._requests, self._answers):
            with contextlib.suppress(OSError):
                stream.close()


def _answered(answer: dict[str, Any]) -> Any:
    """A server's answer to one call: its plain data, or the error it carries raised."""
    from topodoctor.core.errors import ProbeUnavailable
    from topodoctor.probe.api import NvmlCallError

    if "ok" in answer:
        return answer["ok"]
    if "code" in answer:
        raise NvmlCallError(int(answer["code"]), answer.get("detail", ""))
    raise ProbeUnavailable(answer["unavailable"])


def _serve_forked(parent: int, requests: int, answers: int, backend: Callable[[], NvmlApi] | None) -> None:
    """The forked server's life: a live one's driver starts first of all (its first answers take
    tens of milliseconds, the rest of this process's start-up fits in them), then the server
    dies with ``parent``, keeps only its pipes and serves."""
    if backend is None:
        from functools import partial

        from topodoctor.probe.warm_up import WarmUp

        backend = partial(live_backend, WarmUp())
    from topodoctor.core.signals import die_with_parent

    die_with_parent(parent)
    _quiet(keep=(requests, answers))
    serve(requests, answers, backend)


def live_backend(warm: WarmUp) -> NvmlApi:
    """The live binding, imported while ``warm`` (probe/warm_up.py) has the driver answer its
    first calls, with what serving needs."""
    warm.load_binding()
    import json  # noqa: F401  (serve's, loaded while the driver answers)

    from topodoctor.probe.nvml import LiveNvml

    warm.join()
    return LiveNvml()


def serve(requests: int, answers: int, backend: Callable[[], NvmlApi]) -> None:
    """The server's loop: make the backend, then answer each request line with one line."""
    import json

    from topodoctor.core.errors import ProbeUnavailable

    api: NvmlApi | None = None
    unavailable: dict[str, Any] = {}
    try:
        api = backend()
    except ProbeUnavailable as exc:  # no binding: every call says so, as the probe would have
        unavailable = {"unavailable": str(exc)}
    from topodoctor.probe.api import NvmlCallError

    def answer(fn: str, args: list[Any]) -> dict[str, Any]:
        if api is None:
            return unavailable
        try:
            return {"ok": api.call(fn, *args)}
        except NvmlCallError as exc:
            return {"code": exc.code, "detail": exc.detail}

    with os.fdopen(requests, encoding="utf-8") as inbox, os.fdopen(answers, "w", encoding="utf-8") as outbox:
        for line in inbox:
            request = json.loads(line)
            if isinstance(request, dict):  # calls asked ahead: one answer each, in their order
                reply: Any = [answer(*json.loads(key)) for key in request["many"]]
            else:
                reply = answer(*request)
            outbox.write(json.dumps(reply) + "\n")
            outbox.flush()


def _quiet(keep: tuple[int, ...]) -> None:
    """The server's descriptors: its two pipes, and /dev/null for the standard streams (a
    library's stray print must not reach the user's terminal). Everything else inherited is
    closed: a copy of the client's own answer pipe held here would keep the client's reader
    waiting for its end until the server exits."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd not in keep:
            os.dup2(devnull, fd)
    low = 3
    for fd in sorted({*keep, devnull}):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
    if devnull not in keep and devnull > 2:
        os.close(devnull)


_early: NvmlServer | None = None


def start_early() -> None:
    """Start the server now, for the probe's child forked later to adopt (the console entry
    point calls it for a command line that may probe the live host)."""
    global _early
    if _early is None:
        _early = NvmlServer.start()


def adopt() -> NvmlServer | None:
    """The server started early, in the probe's child that inherited it; None if none was."""
    global _early
    server, _early = _early, None
    return server


def hand_over(child: int) -> None:
    """In the entry point, once the probe's child is forked: the server joins the child's process
    group (a budget that kills the child kills the server) and this process lets go of it."""
    global _early
    server, _early = _early, None
    if server is not None:
        from topodoctor.core.budget import reap_later

        with contextlib.suppress(OSError):
            os.setpgid(server.pid, child)
        server.close()
        reap_later(server.pid)


def drop_early() -> None:
    """Kill a server nobody adopted (the command line read otherwise, a usage error)."""
    global _early
    server, _early = _early, None
    if server is not None:
        from topodoctor.core.budget import kill_group

        server.close()
        kill_group(server.pid)
