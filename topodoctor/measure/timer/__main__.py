"""``python -m topodoctor.measure.timer PLAN``: a timer process serving ``PLAN`` (bandwidth or
fitness, ``plans.PLANS``) on stdin."""

from __future__ import annotations

import sys

from topodoctor.measure.timer.plans import PLANS, main

if len(sys.argv) != 2 or sys.argv[1] not in PLANS:
    sys.exit(f"usage: python -m topodoctor.measure.timer {{{','.join(PLANS)}}}")
main(PLANS[sys.argv[1]])
