"""The rule cases of the NCCL and CUDA environment (TD6xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from dataclasses import replace

from conftest import FIXTURES
from rule_case_kit import NCCL_FILES, Case, both, every_gpu, gpu, nics
from rule_case_kit_edges_counts import HGX, renamed_nic
from rule_case_kit_variants import UNREAD, UUID3, _env

CASES = [
    # TD609: NCCL takes 1 to 31
    Case("TD609", True, "h200-x4", "NCCL_IB_TIMEOUT=0", env={"NCCL_IB_TIMEOUT": "0"}),
    Case("TD609", False, "h200-x4", "NCCL_IB_TIMEOUT=1", env={"NCCL_IB_TIMEOUT": "1"}),
    # TD607: a prefix of exactly two devices is already ambiguous
    Case(
        "TD607",
        True,
        HGX,
        "NCCL_IB_HCA=mlx5_1 with mlx5_7 named mlx5_10",
        renamed_nic("mlx5_7", "mlx5_10"),
        env={"NCCL_IB_HCA": "mlx5_1"},
    ),
    # TD620: a level name in lower case or padded, and nvidia-smi's NODE in lower case
    Case("TD620", True, "h200-x4", "NCCL_P2P_LEVEL=' nvl'", env={"NCCL_P2P_LEVEL": " nvl"}),
    Case("TD620", True, "h200-x4", "NCCL_P2P_LEVEL=node", env={"NCCL_P2P_LEVEL": "node"}),
    # TD610: LL128 excluded is a debugging choice; LL128 named alone is TD611's
    Case("TD610", True, "h200-x4", "NCCL_PROTO=^LL128", env={"NCCL_PROTO": "^LL128"}),
    Case("TD610", False, "h200-x4", "NCCL_PROTO=LL128 (TD611's)", env={"NCCL_PROTO": "LL128"}),
    # TD605: two prefixes, each selecting an interface that is up (not one matching both)
    Case("TD605", False, HGX, "NCCL_SOCKET_IFNAME=eth,ib", env={"NCCL_SOCKET_IFNAME": "eth,ib"}),
    Case("TD605", False, HGX, "NCCL_SOCKET_IFNAME=^eth0: the ib interfaces left", env={"NCCL_SOCKET_IFNAME": "^eth0"}),
    Case(
        "TD605",
        True,
        HGX,
        "NCCL_SOCKET_IFNAME=^eth,ib: every interface excluded",
        env={"NCCL_SOCKET_IFNAME": "^eth,ib"},
    ),
    # TD607: RoCE devices are matched as InfiniBand ones are
    Case("TD607", True, HGX, "NCCL_IB_HCA=mlx5 on RoCE devices", nics(kind="roce"), env={"NCCL_IB_HCA": "mlx5"}),
    # TD620: a reading of 0 says what 0 does; padding around a name is reported with it
    Case("TD620", True, "h200-x4", "NCCL_IB_DISABLE=false (strtoll reads 0)", env={"NCCL_IB_DISABLE": "false"}),
    Case("TD620", True, "h200-x4", "NCCL_P2P_LEVEL=' NODE'", env={"NCCL_P2P_LEVEL": " NODE"}),
    # TD616 / TD617 / TD622: CUDA's variables with blanks, and indices among UUIDs
    Case("TD616", True, "h200-x4", "CUDA_VISIBLE_DEVICES='1, 1'", env={"CUDA_VISIBLE_DEVICES": "1, 1"}),
    Case(
        "TD617",
        True,
        "h200-x4",
        "CUDA_VISIBLE_DEVICES=a UUID, then an index",
        env={"CUDA_VISIBLE_DEVICES": "GPU-00000000-0000-4000-8000-000000000003,1"},
    ),
    Case("TD622", True, "h200-x4", "CUDA_LAUNCH_BLOCKING=' 1'", env={"CUDA_LAUNCH_BLOCKING": " 1"}),
    # nccl and cuda environment
    Case("TD601", True, "h200-x4", "NCCL_P2P_DISABLE=1", env={"NCCL_P2P_DISABLE": "1"}),
    Case("TD601", False, "consumer-no-p2p", "NCCL_P2P_DISABLE=1 without NVLink", env={"NCCL_P2P_DISABLE": "1"}),
    Case("TD602", True, "h200-x4", "NCCL_P2P_LEVEL=LOC", env={"NCCL_P2P_LEVEL": "LOC"}),
    Case("TD602", False, "h200-x4", "NCCL_P2P_LEVEL=NVL", env={"NCCL_P2P_LEVEL": "NVL"}),
    Case("TD603", True, "h200-x4", "NCCL_SHM_DISABLE=1", env={"NCCL_SHM_DISABLE": "1"}),
    Case("TD603", False, "h200-x4", "NCCL_SHM_DISABLE=0", env={"NCCL_SHM_DISABLE": "0"}),
    Case("TD604", True, "hgx-8gpu-2socket", "NCCL_IB_DISABLE=1", env={"NCCL_IB_DISABLE": "1"}),
    Case("TD604", False, "h200-x4", "NCCL_IB_DISABLE=1 without RDMA NICs", env={"NCCL_IB_DISABLE": "1"}),
    Case("TD605", True, "h200-x4", "NCCL_SOCKET_IFNAME=ib", env={"NCCL_SOCKET_IFNAME": "ib"}),
    Case("TD605", False, "h200-x4", "NCCL_SOCKET_IFNAME=eth", env={"NCCL_SOCKET_IFNAME": "eth"}),
    Case("TD606", True, "hgx-8gpu-2socket", "NCCL_IB_HCA=mlx5_9", env={"NCCL_IB_HCA": "mlx5_9"}),
    Case("TD606", False, "hgx-8gpu-2socket", "NCCL_IB_HCA==mlx5_1,=mlx5_2", env={"NCCL_IB_HCA": "=mlx5_1,=mlx5_2"}),
    Case("TD607", True, "hgx-8gpu-2socket", "NCCL_IB_HCA=mlx5", env={"NCCL_IB_HCA": "mlx5"}),
    Case("TD607", False, "hgx-8gpu-2socket", "NCCL_IB_HCA=mlx5_1 (one device)", env={"NCCL_IB_HCA": "mlx5_1"}),
    Case(
        "TD608",
        True,
        "h200-x4",
        "NCCL_TOPO_FILE missing",
        env={"NCCL_TOPO_FILE": "/nonexistent/topo.xml"},
        severity="error",
    ),
    Case(
        "TD608",
        False,
        "h200-x4",
        "NCCL_TOPO_FILE naming this host's GPU",
        env={"NCCL_TOPO_FILE": str(NCCL_FILES / "topo-x4.xml")},
    ),
    Case("TD609", True, "h200-x4", "NCCL_IB_TIMEOUT=32", env={"NCCL_IB_TIMEOUT": "32"}),
    Case("TD609", False, "h200-x4", "NCCL_IB_TIMEOUT=31", env={"NCCL_IB_TIMEOUT": "31"}),
    Case("TD610", True, "h200-x4", "NCCL_ALGO=Tree", env={"NCCL_ALGO": "Tree"}),
    Case("TD610", False, "h200-x4", "NCCL_DEBUG=WARN", env={"NCCL_DEBUG": "WARN"}),
    Case("TD611", True, "h200-x4", "NCCL_PROTO=LL128", env={"NCCL_PROTO": "LL128"}),
    Case("TD611", False, "h200-x4", "NCCL_PROTO=^LL128", env={"NCCL_PROTO": "^LL128"}),
    Case("TD612", True, "h200-x4", "NCCL_IGNORE_DISABLED_P2P=1", env={"NCCL_IGNORE_DISABLED_P2P": "1"}),
    Case("TD612", False, "h200-x4", "NCCL_IGNORE_DISABLED_P2P=0", env={"NCCL_IGNORE_DISABLED_P2P": "0"}),
    Case("TD613", True, "h200-x4", "NCCL_MAX_RINGS=8", env={"NCCL_MAX_RINGS": "8"}),
    Case("TD613", False, "h200-x4", "NCCL_MAX_NCHANNELS=8", env={"NCCL_MAX_NCHANNELS": "8"}),
    Case("TD614", True, "h200-x4", "NCCL_SOCKET_IFNAM=eth0", env={"NCCL_SOCKET_IFNAM": "eth0"}),
    Case("TD614", False, "h200-x4", "NCCL_SOCKET_IFNAME=eth0", env={"NCCL_SOCKET_IFNAME": "eth0"}),
    Case(
        "TD614",
        True,
        "h200-x4",
        "NCCL_NVLS_ENABLED=0 under NCCL 2.26.2",
        env={"NCCL_VERSION": "2.26.2-1", "NCCL_NVLS_ENABLED": "0"},
    ),
    # a variable NCCL 2.30.7 no longer reads (removed after 2.30.4), and one 2.18 does not read yet
    Case(
        "TD625",
        True,
        "h200-x4",
        "NCCL_SHM_USE_CUDA_MEMCPY=1 under NCCL 2.30.7",
        env={"NCCL_VERSION": "2.30.7-1", "NCCL_SHM_USE_CUDA_MEMCPY": "1"},
    ),
    Case(
        "TD625",
        False,
        "h200-x4",
        "NCCL_SHM_USE_CUDA_MEMCPY=1 under NCCL 2.30.4",
        env={"NCCL_VERSION": "2.30.4-1", "NCCL_SHM_USE_CUDA_MEMCPY": "1"},
    ),
    Case(
        "TD625",
        True,
        "h200-x4",
        "NCCL_PAT_ENABLE=0 under NCCL 2.18.6",
        env={"NCCL_VERSION": "2.18.6-1", "NCCL_PAT_ENABLE": "0"},
    ),
    Case("TD625", False, "h200-x4", "NCCL_PAT_ENABLE=0, version not known", env={"NCCL_PAT_ENABLE": "0"}),
    Case("TD621", True, "h200-x4", "NCCL_NET=IB without RDMA NICs", env={"NCCL_NET": "IB"}),
    Case("TD621", False, "hgx-8gpu-2socket", "NCCL_NET=ib with InfiniBand", env={"NCCL_NET": "ib"}),
    Case("TD622", True, "h200-x4", "CUDA_LAUNCH_BLOCKING=1", env={"CUDA_LAUNCH_BLOCKING": "1"}),
    Case("TD622", False, "h200-x4", "CUDA_LAUNCH_BLOCKING=0", env={"CUDA_LAUNCH_BLOCKING": "0"}),
    Case("TD623", True, "h200-x4", "NCCL_CROSS_NIC=7", env={"NCCL_CROSS_NIC": "7"}),
    Case("TD623", False, "h200-x4", "NCCL_CROSS_NIC=2", env={"NCCL_CROSS_NIC": "2"}),
    Case("TD624", True, "h200-x4", "NCCL_ALGO=ring,trees", env={"NCCL_ALGO": "ring,trees"}),
    Case("TD624", False, "h200-x4", "NCCL_PROTO=^ll128;reduce:ll", env={"NCCL_PROTO": "^ll128;reduce:ll"}),
    Case("TD615", True, "h200-x4", "CUDA_VISIBLE_DEVICES=0,4", env={"CUDA_VISIBLE_DEVICES": "0,4"}),
    Case("TD615", False, "h200-x4", "CUDA_VISIBLE_DEVICES=0,3", env={"CUDA_VISIBLE_DEVICES": "0,3"}),
    Case("TD616", True, "h200-x4", "CUDA_VISIBLE_DEVICES=1,1", env={"CUDA_VISIBLE_DEVICES": "1,1"}),
    Case("TD616", False, "h200-x4", "CUDA_VISIBLE_DEVICES=1,0", env={"CUDA_VISIBLE_DEVICES": "1,0"}),
    Case("TD617", True, "h200-x4", "CUDA_VISIBLE_DEVICES=0,1", env={"CUDA_VISIBLE_DEVICES": "0,1"}),
    Case(
        "TD617",
        False,
        "h200-x4",
        "with CUDA_DEVICE_ORDER=PCI_BUS_ID",
        env={"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    ),
    Case("TD618", True, "h200-x4", "NCCL_NVLS_ENABLE=0 on 4 GPUs", env={"NCCL_NVLS_ENABLE": "0"}, severity="info"),
    Case(
        "TD618",
        True,
        "h200-x4",
        "NCCL_NVLS_ENABLE=off (read as 0)",
        env={"NCCL_NVLS_ENABLE": "off"},
        severity="warning",
    ),
    Case("TD618", True, "hgx-8gpu-2socket", "NCCL_NVLS_ENABLE=0 on 8 GPUs", env={"NCCL_NVLS_ENABLE": "0"}),
    Case(
        "TD618",
        False,
        "h200-x2",
        "NCCL_NVLS_ENABLE=0 on 2 GPUs (NVLS would add nothing: quiet)",
        env={"NCCL_NVLS_ENABLE": "0"},
    ),
    Case("TD618", False, "h200-x4", "NCCL_NVLS_ENABLE=1", env={"NCCL_NVLS_ENABLE": "1"}),
    Case("TD618", False, "h100-x1", "NCCL_NVLS_ENABLE=0 without NVSwitch", env={"NCCL_NVLS_ENABLE": "0"}),
    Case(
        "TD619",
        True,
        "h200-x4",
        "NCCL_CONF_FILE with a malformed line",
        env={"NCCL_CONF_FILE": str(NCCL_FILES / "malformed.conf")},
    ),
    Case(
        "TD619", False, "h200-x4", "NCCL_CONF_FILE well formed", env={"NCCL_CONF_FILE": str(NCCL_FILES / "good.conf")}
    ),
    Case(
        "TD608",
        True,
        "h200-x4",
        "NCCL_TOPO_FILE with a link speed NCCL does not know (30.0 GT/s)",
        env={"NCCL_TOPO_FILE": str(FIXTURES / "nccl" / "topo-x4-speed.xml")},
        severity="warning",
    ),
    Case("TD620", True, "h200-x4", "NCCL_P2P_DISABLE=true (strtoll reads 0)", env={"NCCL_P2P_DISABLE": "true"}),
    Case("TD620", False, "h200-x4", "NCCL_P2P_DISABLE=1", env={"NCCL_P2P_DISABLE": "1"}),
    _env("TD606", False, HGX, "NCCL_IB_HCA", "=mlx5_1:1", "an exact device with its port"),
    _env("TD606", False, HGX, "NCCL_IB_HCA", "mlx5_1:1", "a device with its port"),
    _env("TD606", True, HGX, "NCCL_IB_HCA", "mlx5_9:1", "no such device, whatever its port"),
    _env("TD606", True, HGX, "NCCL_IB_HCA", "=mlx5", "exact: no device is named mlx5"),
    _env("TD606", True, HGX, "NCCL_IB_HCA", "MLX5_1", "NCCL compares device names case-sensitively"),
    _env("TD607", True, HGX, "NCCL_IB_HCA", "mlx5_", "a prefix of all eight devices"),
    _env("TD607", False, HGX, "NCCL_IB_HCA", "mlx5_1:1", "a prefix of one device, with its port"),
    _env("TD605", False, HGX, "NCCL_SOCKET_IFNAME", "=eth0", "exact, and up"),
    _env("TD605", True, HGX, "NCCL_SOCKET_IFNAME", "=eth", "exact: no interface is named eth"),
    _env("TD605", True, HGX, "NCCL_SOCKET_IFNAME", "ETH0", "interface names are case-sensitive"),
    _env("TD621", True, "h200-x4", "NCCL_NET", "ib", "NCCL reads the network's name case-blind"),
    _env("TD621", True, "h200-x4", "NCCL_NET", "Ib", "NCCL reads the network's name case-blind"),
    _env("TD621", False, "h200-x4", "NCCL_NET", "socket", "sockets need no RDMA device"),
    _env("TD611", True, "h200-x4", "NCCL_PROTO", "ll128", "NCCL reads protocol names case-blind"),
    _env("TD610", True, "h200-x4", "NCCL_DEBUG", "trace", "NCCL reads the level case-blind"),
    _env("TD610", True, "h200-x4", "NCCL_DEBUG", " TRACE ", "spaces around it, as a job script may leave them"),
    _env("TD610", False, "h200-x4", "NCCL_DEBUG", "INFO", "a level that costs little"),
    _env("TD601", True, "h200-x4", "NCCL_P2P_DISABLE", " 1 ", "spaces around it"),
    _env("TD611", False, "h200-x4", "NCCL_PROTO", "^ll128", "LL128 excluded"),
    Case(
        "TD604", True, HGX, "NCCL_IB_DISABLE=1 on a host of RoCE NICs", nics(kind="roce"), env={"NCCL_IB_DISABLE": "1"}
    ),
    _env("TD610", False, "h200-x4", "NCCL_PROTO", "ll128", "LL128 turned on is TD611's, not a debugging leftover"),
    # CUDA_VISIBLE_DEVICES as a job script may leave it: blanks, a UUID or its prefix, an entry mid-list
    _env("TD615", True, "h200-x4", "CUDA_VISIBLE_DEVICES", "  ", "blanks only: CUDA sees no GPU"),
    _env("TD615", False, "h200-x4", "CUDA_VISIBLE_DEVICES", f"{UUID3},0", "a GPU's whole UUID, then an index"),
    _env("TD615", False, "h200-x4", "CUDA_VISIBLE_DEVICES", "GPU-00000000", "a prefix of the GPUs' UUIDs"),
    _env("TD615", True, "h200-x4", "CUDA_VISIBLE_DEVICES", "0,GPU-ffffffff,1,2", "a UUID no GPU has, mid-list"),
]

# TD601 / TD602 where the GPUs' NVLinks are listed but none is up (the third value between NVLink up
# and none): the setting keeps NCCL off the links once they are repaired; a link past NVML's count is none
ALL_DOWN = "x2-nvlinks-all-down"
CASES += [
    Case("TD601", True, ALL_DOWN, "NCCL_P2P_DISABLE=1, every NVLink listed but down", env={"NCCL_P2P_DISABLE": "1"}),
    Case("TD602", True, ALL_DOWN, "NCCL_P2P_LEVEL=LOC, every NVLink listed but down", env={"NCCL_P2P_LEVEL": "LOC"}),
    Case(
        "TD601",
        False,
        ALL_DOWN,
        "NCCL_P2P_DISABLE=1, NVML counting no link of the ones listed",
        both(gpu(0, nvlink_count=0), gpu(1, nvlink_count=0)),
        env={"NCCL_P2P_DISABLE": "1"},
    ),
    Case(
        "TD601",
        False,
        ALL_DOWN,
        "NCCL_P2P_DISABLE=1, every link's state unreadable: not judged (TD901)",
        every_gpu(lambda g: replace(g, nvlinks=tuple(replace(k, active=UNREAD) for k in g.nvlinks))),
        env={"NCCL_P2P_DISABLE": "1"},
    ),
    Case(
        "TD602",
        True,
        "h200-x4",
        "NCCL_P2P_LEVEL=LOC beside NCCL_P2P_DISABLE=0 (P2P left on, the level turns it off)",
        env={"NCCL_P2P_LEVEL": "LOC", "NCCL_P2P_DISABLE": "0"},
    ),
    Case(
        "TD602",
        False,
        ALL_DOWN,
        "NCCL_P2P_LEVEL=LOC beside NCCL_P2P_DISABLE=1 (TD601 says it)",
        env={"NCCL_P2P_LEVEL": "LOC", "NCCL_P2P_DISABLE": "1"},
    ),
]

# TD620 / TD623 at the values NCCL reads as written: the two clean readings of NCCL_P2P_DISABLE, a
# level by name or by its old number, a choice NCCL upper-cases first, a domain's lowest value; and a
# 1 with trailing text (still 1), a 0-meaning variable read as 1
CASES += [
    Case("TD620", False, "h200-x4", "NCCL_P2P_DISABLE=0", env={"NCCL_P2P_DISABLE": "0"}),
    Case("TD620", True, "h200-x4", "NCCL_P2P_DISABLE=1abc (strtoll reads 1)", env={"NCCL_P2P_DISABLE": "1abc"}),
    Case("TD620", True, "h200-x4", "NCCL_SHM_DISABLE=1x (strtoll reads 1)", env={"NCCL_SHM_DISABLE": "1x"}),
    Case("TD620", False, "h200-x4", "NCCL_P2P_LEVEL=NVL", env={"NCCL_P2P_LEVEL": "NVL"}),
    Case("TD620", False, "h200-x4", "NCCL_P2P_LEVEL=2 (the old numbering)", env={"NCCL_P2P_LEVEL": "2"}),
    Case("TD620", False, "h200-x4", "NCCL_LAUNCH_MODE=group (NCCL upper-cases it)", env={"NCCL_LAUNCH_MODE": "group"}),
    Case(
        "TD620", True, "h200-x4", "NCCL_SOCKET_FAMILY=af_inet (read as written)", env={"NCCL_SOCKET_FAMILY": "af_inet"}
    ),
    Case("TD623", False, "h200-x4", "NCCL_CROSS_NIC=0", env={"NCCL_CROSS_NIC": "0"}),
]

# TD625 judges by the NCCL the measured collectives ran (torch's) before the image's NCCL_VERSION
CASES.append(
    Case(
        "TD625",
        False,
        "h200-x4",
        "NCCL_PAT_ENABLE=0, the image saying 2.18.6, the collectives run on NCCL 2.28.9",
        env={"NCCL_VERSION": "2.18.6-1", "NCCL_PAT_ENABLE": "0"},
        collectives="h200-x4-healthy",
    )
)
