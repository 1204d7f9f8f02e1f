"""The hello: the first task every copy timer is sent, which starts CUDA on the GPUs it names.
Plain data and nothing imported: the console entry point builds one before it forks the timer
(service/early_copies.py), when nothing else may load yet."""

from __future__ import annotations

from typing import Any


def hello_task(visible: str | None, peers: bool, extra: dict[str, Any]) -> dict[str, Any]:
    """The hello for the GPUs ``visible`` names (a CUDA_VISIBLE_DEVICES value, or None for all),
    with peer access between them or not, and ``extra`` (``hello_extra``)."""
    return {"op": "hello", "visible": visible, "peers": peers, **extra}


def hello_extra(sm_kernel: str | None = None) -> dict[str, Any]:
    """What a hello asks besides the GPUs: the PTX kernels (SM copies, the data checks on the GPU),
    and the SM copies' kernel where one is named (``copy_kernels`` names)."""
    return {"kernels": True, **({"copy_kernel": sm_kernel} if sm_kernel else {})}
