"""Which world a rank belongs to: from torchrun's or Slurm's environment, or made locally.

No torch here: the command line decides between joining a launcher's world and spawning
its own ranks before anything heavy is imported.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from topodoctor.core.errors import InputError

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class World:
    """The torch.distributed world one rank joins: its rank, sizes, rendezvous address and launcher."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun, slurm, topodoctor

    def env(self) -> dict[str, str]:
        """The standard variables torch.distributed's env:// rendezvous reads."""
        return {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise InputError(f"{name}={env.get(name)!r} is not an integer") from None


def from_env(env: Mapping[str, str] | None = None) -> World | None:
    """The world a launcher made, or None when this process was started on its own.

    torchrun (and anything speaking its protocol) sets RANK / WORLD_SIZE / LOCAL_RANK /
    MASTER_ADDR / MASTER_PORT. Under ``srun`` each task has SLURM_PROCID / SLURM_NTASKS /
    SLURM_LOCALID; the rendezvous address must still be given (MASTER_ADDR), since a task
    cannot know which node holds rank 0 without asking Slurm.
    """
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        size = _int(env, "WORLD_SIZE")
        rank = _int(env, "RANK")
        local = _int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else rank
        local_size = _int(env, "LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in env else size
        launcher = "torchrun"
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env and _int(env, "SLURM_NTASKS") > 1:
        size = _int(env, "SLURM_NTASKS")
        rank = _int(env, "SLURM_PROCID")
        local = _int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        per_node = env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
        local_size = int(per_node) if per_node.isdigit() else size
        launcher = "slurm"
    else:
        return None
    if not 0 <= rank < size:
        raise InputError(f"rank {rank} is outside a world of {size}")
    addr = env.get("MASTER_ADDR")
    if not addr:
        raise InputError(f"launched by {launcher} but MASTER_ADDR is not set (the host of rank 0)")
    port = _int(env, "MASTER_PORT") if "MASTER_PORT" in env else DEFAULT_PORT
    return World(rank, size, local, local_size, addr, port, launcher)


def free_port() -> int:
    """A TCP port free on the loopback now, for a world made on this host."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_worlds(nprocs: int) -> list[World]:
    """The worlds of ``nprocs`` ranks spawned on this host, all meeting on one free local port."""
    port = free_port()
    return [World(r, nprocs, r, nprocs, "127.0.0.1", port, "topodoctor") for r in range(nprocs)]
