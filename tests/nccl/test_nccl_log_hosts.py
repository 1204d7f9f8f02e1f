"""A log that merges several hosts' output keeps what each host said apart: the RDMA link layers NCCL
names per host (``NET/IB : Using [0]mlx5_0:1/IB``), read on real logs of an InfiniBand host pair
(NVIDIA/nccl-tests#293) and a RoCE host (NVIDIA/nccl#799) pasted into one file."""

from __future__ import annotations

from pathlib import Path

from topodoctor.nccl.evidence import agreed_layers
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real"
ROCE = (REAL / "nccl-799-modify-qp-no-such-device-roce.log").read_text()
IB = (REAL / "nccl-tests-293-healthy-ib-sharp.log").read_text()


def _qp_finding(text: str) -> tuple[str, str]:
    (f,) = [f for f in explain([parse_file("job.log", text)]) if f.code == "TD063"]
    return f.message, f.fix


def test_each_host_keeps_its_own_link_layers() -> None:
    log = parse_file("job.log", IB + ROCE)
    assert log.link_layers["test1"] == {"mlx5_0": "IB"} and log.link_layers["test2"] == {"mlx5_0": "IB"}
    roce_host = next(h for h, layers in log.link_layers.items() if "mlx5_3" in layers)
    assert log.link_layers[roce_host] == {"mlx5_3": "RoCE"}


def test_a_failure_is_read_with_its_own_hosts_layers() -> None:
    # the RoCE host's failed queue pair names its own device, not the IB hosts' mlx5_0
    message, fix = _qp_finding(IB + ROCE)
    assert (message, fix) == _qp_finding(ROCE)
    assert "mlx5_0" not in message + fix and "mlx5_3" in fix


def test_a_device_two_hosts_name_apart_has_no_one_layer() -> None:
    hosts = {"a": {"mlx5_0": "IB", "mlx5_1": "IB"}, "b": {"mlx5_0": "RoCE", "mlx5_1": "IB"}}
    assert agreed_layers(hosts) == {"mlx5_1": "IB"}
