"""The measurements a ``check`` adds after its probe, in its budgeted child: copies, collectives
and the fitness of a level. Loaded only by a check that measures: a static one, in every prolog,
loads none of the measuring code."""

from __future__ import annotations

from topodoctor.service.collectives import check_pass, driver_gpus
from topodoctor.service.copies import bandwidth_pass
from topodoctor.service.fitness import fitness_pass
from topodoctor.service.passes import Pass


def check_passes(bandwidth: bool, collectives: bool, scope: str, level: str = "static") -> tuple[Pass, ...]:
    """The passes, in the order they run. A level above static adds copies, fitness and (with more
    than one GPU) collectives."""
    if level != "static":
        bandwidth, collectives = True, collectives or driver_gpus() > 1
    passes = ((bandwidth_pass(scope),) if bandwidth else ()) + ((check_pass(),) if collectives else ())
    return passes + ((fitness_pass(level, scope),) if level != "static" else ())
