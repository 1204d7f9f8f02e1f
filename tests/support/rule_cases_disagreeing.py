"""Rule cases where the expectations file and what was found disagree, and where an input holds
its rarer value: an expectation above what a GPU's link can train at, more GPUs than the node type,
MIG on against an explicit ``mig_enabled: false``, a NIC port in a state between DOWN and ACTIVE.
Each firing case has its near miss: the same host without the disagreement."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import Case, gpu, nics, pcie


def _expecting(**fields: Any) -> Any:
    """A last edit of the Context: its expectations file says ``fields`` (other than the host's)."""

    def edit(ctx: Any) -> None:
        ctx.expect = replace(ctx.expect, **fields)

    return edit


X8_GPU = pcie(1, width_current=8, width_max=8)  # a GPU whose link can train at x8 at most
GEN4_GPU = pcie(1, gen_current=4, gen_max=4, gpu_gen_max=4)  # and one whose link tops out at Gen4

DISAGREEING_CASES = [
    # the expectations file asks for more than the GPU's own link can give: the file wins
    Case("TD203", True, "h200-x4", "x16 expected of a GPU whose link trains x8 at most", X8_GPU,
         expect_from="h200-x4", subjects=("GPU1",)),
    Case("TD203", False, "h200-x4", "x8 of an x8 link, and no expectations file", X8_GPU),
    Case("TD203", False, "h200-x4", "x8 expected of an x8 link", X8_GPU, expect_from="h200-x4",
         context=_expecting(pcie_width=8)),
    Case("TD204", True, "h200-x4", "Gen5 expected of a GPU whose link runs Gen4 at most", GEN4_GPU,
         expect_from="h200-x4", subjects=("GPU1",)),
    Case("TD204", False, "h200-x4", "Gen4 of a Gen4 link, and no expectations file", GEN4_GPU),
    # more GPUs than the node type has is a mismatch too, not only fewer
    Case("TD801", True, "h200-x4", "4 GPUs where the x2 node type has 2", expect_from="h200-x2"),
    # MIG: an explicit "not enabled" in the file, and an explicit "enabled"
    Case("TD506", True, "h200-x4", "MIG on where the file says mig_enabled: false", gpu(2, mig_mode=True),
         expect_from="h200-x4", context=_expecting(mig_enabled=False), subjects=("GPU2",)),
    Case("TD506", False, "h200-x4", "MIG on where the file says mig_enabled: true", gpu(2, mig_mode=True),
         expect_from="h200-x4", context=_expecting(mig_enabled=True)),
    # a port between DOWN and ACTIVE (the IB port states INIT, ARMED; the physical state POLLING)
    *[
        Case("TD803", True, "hgx-8gpu-2socket", f"every port {state}", nics(state=state),
             expect_from="hgx-8gpu-2socket")
        for state in ("INIT", "ARMED", "POLLING")
    ],
    Case("TD803", False, "hgx-8gpu-2socket", "every port 'active', as a lower-case reader writes it",
         nics(state="active"), expect_from="hgx-8gpu-2socket"),
]  # fmt: skip
