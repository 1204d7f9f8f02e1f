"""The cause engine: joins what a check or a run gathered (NCCL's settings and account, NVML's view of
the GPUs during the run, the copy rates, the topology's model) and names the cause of each symptom a
rule found. Data in, causes out: no I/O, no NVML, no torch."""

from topodoctor.diagnosis.explain import SYMPTOMS, Case, cause_of, explain

__all__ = ["SYMPTOMS", "Case", "cause_of", "explain"]
