"""Fitness: is each GPU fit to run a job at full speed. HBM bandwidth, compute under load with
NVML readings, SM-initiated copies and latency; measured in killable children (the CUDA timer's
fitness plan, measure/timer/plans.py, ``worker_gemm`` on torch), judged by topodoctor/rules/fitness_measured.py."""
