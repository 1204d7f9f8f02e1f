"""Collectives through torch.distributed, measured by nccl-tests' conventions."""
