"""The Python API and the command take the same choices and the same defaults: for every keyword
of ``topodoctor.bandwidth`` and ``topodoctor.collectives`` that an option of the command sets,
its default is the option's, and a mode one accepts the other accepts too."""

from __future__ import annotations

import inspect

import pytest

from topodoctor.api import measure
from topodoctor.cli.args_measure import BandwidthArgs, CollectivesArgs
from topodoctor.cli.options import specs
from topodoctor.core.errors import InputError
from topodoctor.service.copies import bandwidth_settings

# the API's keyword -> the command's option (by field name) where the names differ
BANDWIDTH_NAMES = {"modes": "mode"}
COLLECTIVES_NAMES = {"sizes": "size", "check_data": "no_check"}


def _defaults(fn: object) -> dict[str, object]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}  # type: ignore[arg-type]


def test_bandwidth_takes_the_command_s_modes_and_defaults() -> None:
    options = {name: (opt, default) for name, opt, default in specs(BandwidthArgs)}
    assert options["mode"][0].choices == measure.MODES
    compared = []
    for keyword, default in _defaults(measure.bandwidth).items():
        name = BANDWIDTH_NAMES.get(keyword, keyword)
        if name in options:
            want = options[name][1]
            assert (tuple(default) if keyword == "modes" else default) == want, keyword
            compared.append(keyword)
    assert len(compared) >= 7, compared
    assert set(_defaults(measure.bandwidth)) - {"devices"} <= {BANDWIDTH_NAMES.get(n, n) for n in options} | set(
        BANDWIDTH_NAMES
    )


@pytest.mark.parametrize("mode", measure.MODES)
def test_every_mode_the_command_takes_the_api_s_settings_take(mode: str) -> None:
    assert bandwidth_settings([mode], False, None, None, None, None, 20.0).modes


def test_a_mode_neither_takes_is_refused_alike() -> None:
    with pytest.raises(InputError, match=r"unknown bandwidth mode 'sideways'; choose from oneway"):
        bandwidth_settings(["sideways"], False, None, None, None, None, 20.0)


def test_collectives_takes_the_command_s_defaults() -> None:
    options = {name: default for name, _, default in specs(CollectivesArgs)}
    compared = []
    for keyword, default in _defaults(measure.collectives).items():
        name = COLLECTIVES_NAMES.get(keyword, keyword)
        if name == "no_check":
            assert default is not options[name], keyword  # check_data=True is --no-check's absence
        elif name in options:
            assert default == options[name], keyword
        compared += [keyword] if name in options else []
    assert len(compared) >= 9, compared  # sizes, step_factor, iters, warmup, backend, nprocs, the timeouts...
