"""The modes a copy pass measures, as a person names them: the one list that ``bandwidth --mode``
and the Python API's ``topodoctor.bandwidth(modes=...)`` accept, and what each stands for among
the timer's own modes (``model.copies.Mode``). Data only."""

from __future__ import annotations

from collections.abc import Iterable

SM_MODES = ("sm_oneway", "sm_bidir", "sm_latency")
# the names a person gives; "host", "sm" and "all" stand for several of the timer's modes
COPY_MODES = ("oneway", "bidir", "latency", "h2d", "d2h", "host", "sm", "sm-oneway", "sm-bidir", "sm-latency", "all")
_GROUPS = {"all": ("oneway", "bidir", "latency", "h2d", "d2h", *SM_MODES), "host": ("h2d", "d2h"), "sm": SM_MODES}


def expand_modes(names: Iterable[str]) -> tuple[str, ...]:
    """The timer's modes ``names`` stand for, each once, in order (``sm-oneway`` is ``sm_oneway``).
    ValueError names the first name that is not one of ``COPY_MODES``."""
    out: list[str] = []
    for name in names:
        if name not in COPY_MODES:
            raise ValueError(f"unknown bandwidth mode {name!r}; choose from {', '.join(COPY_MODES)}")
        out += _GROUPS.get(name, (name.replace("-", "_"),))
    return tuple(dict.fromkeys(out))
