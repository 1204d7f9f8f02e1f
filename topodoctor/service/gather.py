"""The probe's own work, in the child (or in the command's process without a budget): the host
probed, the measurement passes run after it, and what goes back; for the text scan, the text
set out here so that the command only draws it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from topodoctor.core.budget import send_part
from topodoctor.core.errors import InputError, TopodoctorError
from topodoctor.model.consistency import validate_snapshot
from topodoctor.probe.sources import probe_host
from topodoctor.report.scan import scan_text
from topodoctor.service.host import ProbedHost, encode
from topodoctor.service.passes import Pass, Source
from topodoctor.service.stamping import stamp

if TYPE_CHECKING:
    from topodoctor.report.scan_text import ScanText


def gather(source: Source, passes: Sequence[Pass], deadline: float) -> ProbedHost:
    """Probe ``source`` and run ``passes``. The probe goes to the parent first (``send_part``) when
    passes follow, so that a pass that fails or overruns leaves what the probe found judged; each
    pass that raises is not measured, and why, while the others run."""
    started = {ps.name: ps.start(deadline) for ps in passes if ps.start is not None}
    try:
        p = probe_host(source.replay, source.sysfs_root, source.topology_only)
    except BaseException:
        for ps in passes:
            if ps.stop is not None and ps.name in started:
                ps.stop(started[ps.name])
        raise
    host = ProbedHost(p.snapshot, p.origin, p.process)
    if passes:
        send_part(encode(host))
    for ps in passes:
        at = time.time()
        extra = {"interim": _interim(host, ps.name, at, source.live)} if ps.interim else {}
        try:
            result = ps.run(p.snapshot, source, deadline, started.get(ps.name), **extra)
        except InputError:  # a usage error stays one, whatever ran before it
            raise
        except TopodoctorError as exc:
            host.missed[ps.name] = str(exc)
            continue
        host.measured[ps.name] = stamp(result, p.snapshot, at, source.live)  # when, where, which GPUs
    return host


def scan_text_of(host: ProbedHost) -> ScanText:
    """What the text scan of ``host`` shows, its snapshot checked first as every probe's is."""
    validate_snapshot(host.snapshot, host.origin)
    return scan_text(host.snapshot, host.origin, host.view.graph)


def work(source: Source, passes: Sequence[Pass], deadline: float) -> dict[str, Any]:
    """What the child sends: the ProbedHost, encoded; for a topology-only source, the text scan."""
    if source.topology_only:
        return dict(scan_text_of(gather(source, (), deadline)))
    return encode(gather(source, passes, deadline))


def _interim(host: ProbedHost, name: str, at: float, live: bool) -> Callable[[Any], None]:
    """What a pass hands its result to before its last readings: sent to the parent with the probe
    and every pass done so far, so that the parent judges it should the child die before its end
    (service/probing.py). The ProbedHost itself keeps only final results."""

    def send(result: Any) -> None:
        host.measured[name] = stamp(result, host.snapshot, at, live)
        try:
            with contextlib.suppress(OSError):  # no parent to read it: the final answer fails the same way
                send_part(encode(host))
        finally:
            del host.measured[name]

    return send
