"""The cause engine: joins what a check or a run gathered (NCCL's settings and account, NVML's view of
the GPUs during the run, the copy rates, the topology's model) and names the cause of each symptom a
rule found (``explain.explain``). Data in, causes out: no I/O, no NVML, no torch. The package itself
imports nothing, so a check that found no symptom never loads the engine."""
