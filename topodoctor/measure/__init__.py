"""Measurements beside the snapshot: each a plan (what to run, what to expect), a worker
(the only torch import, in child processes) and a result (plain data)."""
