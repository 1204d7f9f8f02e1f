"""A small synthetic host for unit tests of recording itself (scrubbing, record round trip).

Rules and the probe are tested on real recordings; this exists only where a test must
write a recording, which needs a live-shaped NVML to record from.
"""

from __future__ import annotations

from typing import Any, ClassVar

from topodoctor.probe.api import NvmlCallError


class _Fs:
    FILES: ClassVar[dict[str, str]] = {
        "/sys/devices/system/cpu/online": "0-3",
        "/proc/sys/kernel/hostname": "secret-host",
        "/proc/cpuinfo": "processor\t: 0\nmodel name\t: Test CPU\nphysical id\t: 0\nflags\t\t: fpu hypervisor sse",
        "/proc/sys/kernel/osrelease": "6.1.0",
    }
    DIRS: ClassVar[dict[str, list[str]]] = {"/sys/devices/system/node": ["node0"], "/sys/class/net": ["lo"]}

    def read(self, path: str) -> str:
        if path in self.FILES:
            return self.FILES[path]
        if path == "/sys/devices/system/node/node0/cpulist":
            return "0-3"
        raise FileNotFoundError(2, "No such file", path)

    def read_hex(self, path: str, limit: int) -> str:
        raise FileNotFoundError(2, "No such file", path)

    def listdir(self, path: str) -> list[str]:
        if path in self.DIRS:
            return self.DIRS[path]
        raise FileNotFoundError(2, "No such file", path)

    def realpath(self, path: str) -> str:
        raise FileNotFoundError(2, "No such file", path)

    def read_records(self, path: str, keep: str) -> list[str]:
        raise FileNotFoundError(2, "No such file", path)


class FakeHost:
    """Two GPUs with two NVLinks each, straight to each other."""

    def sysfs(self) -> _Fs:
        return _Fs()

    def call(self, fn: str, *a: Any) -> Any:
        i = int(str(a[0]).split(":")[-1]) if a else 0
        answers = {
            "nvmlInit": None,
            "nvmlShutdown": None,
            "nvmlDeviceGetCount": 2,
            "nvmlSystemGetDriverVersion": "580.1",
            "nvmlSystemGetCudaDriverVersion_v2": 13000,
            "nvmlSystemGetNVMLVersion": "13.580",
            "nvmlDeviceGetHandleByIndex": f"gpu:{i}",
            "nvmlDeviceGetPciInfo": {"busId": f"00000000:{i + 1:02X}:00.0"},
            "nvmlDeviceGetName": "Test GPU",
            "nvmlDeviceGetUUID": f"GPU-12345678-1234-1234-1234-12345678901{i}",
            "nvmlDeviceGetSerial": f"serial-secret-{i}",
            "nvmlDeviceGetNvLinkRemotePciInfo": {"busId": f"00000000:{2 - i:02X}:00.0"},
            "nvmlDeviceGetNvLinkRemoteDeviceType": 0,
            "nvmlDeviceGetCudaComputeCapability": [9, 0],
            "nvmlDeviceGetMemoryInfo": {"total": 2**34},
            "nvmlDeviceGetMigMode": [0, 0],
            "nvmlDeviceGetEccMode": [1, 1],
            "nvmlDeviceGetCpuAffinityWithinScope": [15],
            "nvmlDeviceGetMemoryAffinity": [1],
            "nvmlDeviceGetRemappedRows": [0, 0, 0, 0],
            "nvmlDeviceGetArchitecture": 9,
            "nvmlDeviceGetTopologyCommonAncestor": 30,
            "nvmlDeviceGetP2PStatus": 0,
            "nvmlDeviceGetVirtualizationMode": 0,
        }
        if fn == "nvmlDeviceGetFieldValues":
            return [
                {"field": f, "scope": s, "ret": 0, "value": {91: 2, 165: 1, 166: 6, 164: 26562}.get(f, 0)}
                for f, s in a[1]
            ]
        if fn in answers:
            return answers[fn]
        if fn.startswith("nvmlDeviceGet") and fn not in ("nvmlDeviceGetNumaNodeId", "nvmlDeviceGetGpuFabricInfoV"):
            return 1
        raise NvmlCallError(3)
