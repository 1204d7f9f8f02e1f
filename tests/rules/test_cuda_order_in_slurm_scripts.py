"""TD617 in Slurm's own scripts: slurmd names the job's GPUs in CUDA_VISIBLE_DEVICES for its
prolog and epilog, without CUDA_DEVICE_ORDER; that is Slurm's normal case, not the job's fault, so
the rule stays silent there (SLURM_SCRIPT_CONTEXT) and speaks in the job itself."""

from __future__ import annotations

import pytest

from topodoctor.core.probed import Unsupported
from topodoctor.model.environment import Environment
from topodoctor.probe.environment import capture_process
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, evaluate

GRES = {"SLURM_JOB_ID": "4711", "SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"}


def _td617(env: dict[str, str]) -> list[str]:
    process = capture_process(env, system_conf="/nonexistent/nccl.conf", affinity=Unsupported())
    ctx = Context(probe_host("h200-x4").snapshot, Environment.of(process))
    return [f.message for f in evaluate(ctx, select=["TD617"]).findings]


@pytest.mark.parametrize("script", ["prolog_slurmd", "epilog_slurmd", "prolog_slurmctld"])
def test_silent_in_slurms_scripts(script: str) -> None:
    assert _td617({**GRES, "SLURM_SCRIPT_CONTEXT": script}) == []


def test_it_still_speaks_in_the_job_itself() -> None:
    assert _td617(GRES) == ["CUDA_VISIBLE_DEVICES=0,1 by index, CUDA_DEVICE_ORDER=unset"]
    assert _td617({**GRES, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == []


def test_the_context_is_recorded_with_the_process() -> None:
    assert capture_process({**GRES, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}).environ["SLURM_SCRIPT_CONTEXT"] == (
        "prolog_slurmd"
    )
