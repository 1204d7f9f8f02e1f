"""The job doctor: what a stalled or slow multi-GPU job left behind, read and judged.

``dumps`` reads PyTorch flight-recorder dumps (a restricted unpickler, or their JSON form);
``placement`` says where each rank ran; ``ras`` reads NCCL's RAS answers; ``analysis`` and
``stragglers`` judge them (pure: data in, findings out); ``health`` joins a culprit's host
with that host's topodoctor result; ``load`` does the bounded reading; ``render`` the output.
"""
