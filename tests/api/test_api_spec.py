"""The Python API and the command take the same choices and the same defaults: every keyword of
every function of the API (``scan``, ``check``, ``bandwidth``, ``collectives``, ``predict``,
``diagnose``) is an option of its command's request, with the option's default and, where the
option has choices, a Literal of the same choices; the API builds the request from its keywords
through the same spec (core/options.py ``from_keywords``), so what the command refuses it refuses."""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any, Literal, get_args, get_origin

import pytest

import topodoctor
from topodoctor.api import diagnose, host, measure, verdict
from topodoctor.cli.commands import main
from topodoctor.cli.table import COMMANDS
from topodoctor.core.errors import InputError
from topodoctor.core.options import from_keywords, specs
from topodoctor.service.check import judge
from topodoctor.service.collective_runs import run_of
from topodoctor.service.copies import settings_for
from topodoctor.service.request_bandwidth import BandwidthRequest
from topodoctor.service.request_check import CheckRequest
from topodoctor.service.request_collectives import CollectivesRequest
from topodoctor.service.request_diagnose import DiagnoseRequest
from topodoctor.service.request_scan import ScanRequest

# the API's keyword -> the command's option (by field name) where the names differ
BANDWIDTH_NAMES = {"modes": "mode"}
COLLECTIVES_NAMES = {"ops": "op", "sizes": "size", "check_data": "no_check"}

# every function of the API, its command's request, its keywords' names there, and the keywords no
# option sets as the API takes them (check_data is --no-check's absence, held below)
EVERY = [
    (host.scan, ScanRequest, {}, set()),
    (verdict.check, CheckRequest, {}, set()),
    (measure.bandwidth, BandwidthRequest, BANDWIDTH_NAMES, set()),
    (measure.collectives, CollectivesRequest, COLLECTIVES_NAMES, {"check_data"}),
    (measure.predict, CollectivesRequest, {"ops": "op", "nodes": "predict_nodes"}, set()),
    (diagnose.diagnose, DiagnoseRequest, {}, set()),
]


def _defaults(fn: object) -> dict[str, object]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}  # type: ignore[arg-type]


def test_bandwidth_takes_the_command_s_modes_and_defaults() -> None:
    compared = _held_to(measure.bandwidth, BandwidthRequest, BANDWIDTH_NAMES, set())
    assert {"modes", "quick", "devices", "size_bytes", "iters", "samples", "sm_kernel", "pair_timeout"} <= set(compared)
    assert next(o.choices for n, o, _ in specs(BandwidthRequest) if n == "mode") == measure.MODES


@pytest.mark.parametrize("mode", measure.MODES)
def test_every_mode_the_command_takes_the_api_s_request_takes(mode: str) -> None:
    request = from_keywords(BandwidthRequest, {"mode": [mode]}, {"mode": "modes"})
    assert request.mode == (mode,) and settings_for(request).modes


def test_a_mode_neither_takes_is_refused_alike() -> None:
    with pytest.raises(InputError, match=r"modes must be one of oneway, .*, not 'sideways'"):
        from_keywords(BandwidthRequest, {"mode": "sideways"}, {"mode": "modes"})
    with pytest.raises(InputError, match="unknown bandwidth mode 'sideways'; choose from oneway"):
        settings_for(BandwidthRequest(mode=("sideways",)))  # a request made by hand is held by the service


def test_the_api_reads_a_size_and_the_limits_as_the_command_does() -> None:
    got = from_keywords(BandwidthRequest, {"size_bytes": "1G", "iters": 3}, {})
    assert (got.size_bytes, settings_for(got).iters) == (1 << 30, 3)
    assert from_keywords(BandwidthRequest, {"size_bytes": 4096}, {}).size_bytes == 4096  # bytes, as given
    with pytest.raises(InputError, match="iters must be at least 1, not 0"):
        from_keywords(BandwidthRequest, {"iters": 0}, {})


def test_collectives_takes_the_command_s_defaults_and_choices() -> None:
    compared = _held_to(measure.collectives, CollectivesRequest, COLLECTIVES_NAMES, {"check_data"})
    assert len(compared) >= 11, compared  # ops, sizes, step_factor, iters, warmup, backend, nprocs, the timeouts...
    (no_check,) = [default for name, _, default in specs(CollectivesRequest) if name == "no_check"]
    assert _defaults(measure.collectives)["check_data"] is not no_check  # check_data=True is --no-check's absence


def test_collectives_refuses_what_the_command_refuses() -> None:
    said = {"op": "ops", "size": "sizes"}
    with pytest.raises(InputError, match="backend must be one of nccl, gloo, not 'mpi'"):
        from_keywords(CollectivesRequest, {"backend": "mpi"}, said)
    with pytest.raises(InputError, match="step_factor must be at least 2, not 1"):
        from_keywords(CollectivesRequest, {"step_factor": 1}, said)
    request = from_keywords(CollectivesRequest, {"op": "all_reduce,sendrecv", "size": "1M", "spawn": True}, said)
    run = run_of(request)
    assert [str(op) for op in run.plan.ops] == ["all_reduce", "sendrecv"] and run.plan.sizes == (1 << 20,)
    assert run.spawn and run.nodes is not None and run.fail_level == "error"


def _hints(fn: Any) -> dict[str, object]:
    """Each keyword's annotation, evaluated in its module (None: a name only a type checker sees)."""
    out: dict[str, object] = {}
    for name, p in inspect.signature(fn).parameters.items():
        try:
            out[name] = (
                eval(p.annotation, vars(sys.modules[fn.__module__])) if isinstance(p.annotation, str) else p.annotation
            )
        except NameError:
            out[name] = None
    return out


def _choices(annotation: object) -> tuple[object, ...]:
    """The values a Literal annotation (or an optional one) names; () for another type."""
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return tuple(c for a in get_args(annotation) for c in _choices(a))


def _held_to(fn: object, cls: type, names: dict[str, str], skip: set[str]) -> list[str]:
    """Each keyword of ``fn`` that an option of ``cls`` sets: the same default, and a Literal of
    the same choices where the option has choices. The keywords compared."""
    options = {name: (opt, default) for name, opt, default in specs(cls)}
    hints = _hints(fn)
    compared = []
    for keyword, default in _defaults(fn).items():
        name = names.get(keyword, keyword)
        if keyword in skip:
            continue
        assert name in options, f"{keyword}: no option of {cls.__name__} sets it"
        opt, want = options[name]
        assert (tuple(default) if opt.many and default is not None else default) == want, keyword
        if opt.many:  # a list of choices: the API names the same list (MODES), and refuses another
            assert not _choices(hints[keyword]) or set(_choices(hints[keyword])) == set(opt.choices), keyword
        else:
            assert set(_choices(hints[keyword])) == set(opt.choices), keyword
        compared.append(keyword)
    return compared


def test_check_takes_the_command_s_defaults_and_choices() -> None:
    # every keyword but the rule lists' (strings or lists of them) names the option of the same name
    compared = _held_to(verdict.check, CheckRequest, {}, set())
    assert {"fail_level", "scope", "timeout", "prolog", "select"} <= set(compared)


def test_check_refuses_what_the_command_refuses() -> None:
    host = topodoctor.scan(replay="h100-x1", timeout=0)
    with pytest.raises(InputError, match="fail_level must be one of warning, error, critical, not 'info'"):
        topodoctor.check(host, fail_level="info")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="timeout must be a number"):
        topodoctor.check(host, timeout="soon")  # type: ignore[arg-type]
    report = topodoctor.check(host, select="TD1,TD3", timeout=0)  # commas split, as --select reads them
    assert report.exit_code == topodoctor.check(host, select=["TD1", "TD3"], timeout=0).exit_code


@pytest.mark.parametrize(("fn", "cls", "names", "skip"), EVERY, ids=lambda x: getattr(x, "__name__", ""))
def test_every_keyword_of_the_api_is_its_command_s_option(
    fn: Any, cls: type, names: dict[str, str], skip: set[str]
) -> None:
    compared = _held_to(fn, cls, names, skip)
    assert set(compared) | skip == set(_defaults(fn)) and compared


def test_every_function_of_the_api_is_held() -> None:
    held = {fn.__name__ for fn, _, _, _ in EVERY}
    assert held == {"scan", "check", "bandwidth", "collectives", "predict", "diagnose"}
    assert all(callable(getattr(topodoctor, name)) for name in held)


def test_predict_and_diagnose_refuse_what_their_commands_refuse() -> None:
    found = topodoctor.scan(replay="h100-x2", timeout=0)
    with pytest.raises(InputError, match="nodes must be at least 1, not 0"):
        topodoctor.predict(found, nodes=0)
    assert topodoctor.predict(found, ops="all_reduce") == topodoctor.predict(found, ops=["all_reduce"])
    with pytest.raises(InputError, match="fail_level must be one of warning, error, critical, not 'info'"):
        topodoctor.diagnose("-", fail_level="info")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="timeout must be 0"):
        topodoctor.scan(replay="h100-x1", timeout=-1)


def _command_request(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> Any:
    """The request the command line builds for ``argv``, caught where its runner would run it."""
    got: list[Any] = []
    module, _, name = COMMANDS[argv[0]].runner.partition(":")
    monkeypatch.setattr(importlib.import_module(module), name, lambda request, env: got.append(request) or 0)
    assert main(argv) == 0
    return got[0]


def test_the_api_and_the_command_line_build_one_check_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOPODOCTOR_CONFIG", raising=False)
    argv = ["check", "--replay", "h100-x1", "--select", "TD1,TD3", "--scope", "node", "--fail-level", "critical"]
    typed = _command_request(monkeypatch, [*argv, "--prolog", "--timeout", "12"])
    found = topodoctor.scan(replay="h100-x1", timeout=0)
    outcome = judge(host.probed(found)[0], typed)  # what the API wraps: the service's answer to the request
    judged: list[Any] = []
    monkeypatch.setattr(verdict, "judge", lambda probed, request, budget: judged.append(request) or outcome)
    topodoctor.check(found, select="TD1,TD3", scope="node", fail_level="critical", prolog=True, timeout=12)
    assert judged == [typed] and typed.tags == ("prolog",) and typed.select == ("TD1", "TD3")


def test_the_api_and_the_command_line_build_one_bandwidth_request(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["bandwidth", "--mode", "sm", "--mode", "host", "--size", "1G", "--iters", "3", "--quick"]
    typed = _command_request(monkeypatch, [*argv, "--devices", "0,1", "--pair-timeout", "5", "--timeout", "30"])
    measured: list[Any] = []
    monkeypatch.setattr(measure.copies, "measure", lambda request, budget, source: measured.append(request))
    measure.bandwidth(
        modes=["sm", "host"], size_bytes="1G", iters=3, quick=True, devices=[0, 1], pair_timeout=5, timeout=30
    )
    assert measured == [typed] and typed.mode == ("sm", "host") and typed.size_bytes == 1 << 30
