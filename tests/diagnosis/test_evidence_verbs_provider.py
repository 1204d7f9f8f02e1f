"""libibverbs' own warning for a verbs device whose provider library is missing (rdma-core's
libibverbs/init.c: "Warning: no userspace device-specific driver found for <sysfs path>"): the HCA is
there, NCCL cannot open it and runs on sockets (TD025), and the fix names the provider package.
Wording of hpc-admin-sist/DockerMonitor#7 (a PyTorch job's stderr) and NVIDIA/caffe#590 (ibv_devinfo in
a container)."""

from __future__ import annotations

from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding
from topodoctor.nccl.lines import net_line

PYTORCH = (
    "libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.\n"
    "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0\n"
)
CONTAINER = (
    "ibv_devinfo -l\n"
    + "".join(
        f"libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs{n}\n"
        for n in (4, 3, 2, 1, 0)
    )
    + "0 HCAs found:\n"
)


def td025(text: str) -> Finding:
    got = read_input("stderr.txt", text)
    assert not got.unreadable, got.unreadable
    found = [f for f in judge(join([got])) if f.code == "TD025"]
    assert len(found) == 1, found
    return found[0]


def test_the_line_with_and_without_its_prefix() -> None:
    line = "Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0"
    for text in (line, "libibverbs: " + line):
        got = net_line(text)
        assert got is not None and (got.what, got.value) == ("no-provider", "uverbs0")
    assert net_line("libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.") is None


def test_a_job_stderr_names_the_provider_fix() -> None:
    f = td025(PYTORCH)
    assert "no provider library" in f.message and "uverbs0" in f.message
    assert "ibverbs-providers" in f.fix and "libmlx5" in f.fix and "rdma-core" in f.fix
    assert "uverbs0" in str(f.evidence["lines"])
    assert f.severity == "warning"  # no node count shown: on one node the network may carry nothing


def test_between_nodes_the_missing_provider_is_the_error() -> None:
    two_nodes = "".join(
        f"#  Rank {r} Group  0 Pid   {4000 + r} on {host} device  0 [0x07] NVIDIA H100 80GB HBM3\n"
        for r, host in enumerate(("node1", "node2"))
    )
    f = td025(PYTORCH + two_nodes)
    assert f.severity == "error" and "ibverbs-providers" in f.fix


def test_every_device_of_a_container_listing_is_an_rdma_nic_without_its_provider() -> None:
    f = td025(CONTAINER)
    assert f.evidence["rdma"] == [f"uverbs{n} without its provider" for n in (4, 3, 2, 1, 0)]
    assert f.evidence["network"] == "rdma"
