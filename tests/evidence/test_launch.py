"""Command lines and dumps that set a job's environment."""

from __future__ import annotations

from evidence_support import EVIDENCE, ROOT, kinds, read

from topodoctor.evidence.inputs import read_input


def test_two_docker_runs_each_with_one_gpu() -> None:
    got = read(EVIDENCE / "docker-two-containers.txt")
    launches = [x for p in got.parts for x in p.launches]
    assert [(x.launcher, x.gpus, x.ipc_host, x.network_host) for x in launches] == [
        ("docker", "device=0", True, True), ("docker", "device=1", True, True),
    ]  # fmt: skip
    first = [(s.name, s.value, s.how) for s in got.parts[0].settings]
    assert first == [("NCCL_DEBUG", "INFO", "docker run -e"), ("NCCL_DEBUG_SUBSYS", "INIT,P2P,GRAPH", "docker run -e")]
    assert [(s.name, s.how) for s in got.parts[2].settings] == [("NCCL_COMM_ID", "command prefix")]


def test_mpirun_x_and_sbatch_exports() -> None:
    got = read(EVIDENCE / "slurm-mpirun-env-h100.txt")
    mpirun = {s.name: s.value for s in got.parts[0].settings}
    assert mpirun["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1"
    assert mpirun["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and "PATH" not in mpirun  # -x PATH: the caller's value
    exported = {s.name: s.how for p in got.parts[1:] for s in p.settings}
    assert exported["NCCL_IB_QPS_PER_CONNECTION"] == "export"


def test_srun_export_list_env_dump_and_kubernetes_env() -> None:
    text = (
        "srun --export=ALL,NCCL_IB_DISABLE=1,NCCL_SOCKET_IFNAME=eth0 -N 2 python train.py\n\n"
        "$ env | grep NCCL\nNCCL_P2P_LEVEL=LOC\nNCCL_DEBUG=INFO\n\n"
        '        env:\n        - name: NCCL_NET_GDR_LEVEL\n          value: "0"\n'
    )
    got = read_input("paste", text)
    found = [(s.name, s.value, s.how) for p in got.parts for s in p.settings]
    assert ("NCCL_IB_DISABLE", "1", "srun --export") in found
    assert ("NCCL_P2P_LEVEL", "LOC", "env") in found
    assert ("NCCL_NET_GDR_LEVEL", "0", "kubernetes env") in found
    assert [x.launcher for p in got.parts for x in p.launches] == ["srun"]


def test_docker_flags_with_equals_and_devices() -> None:
    text = (
        "docker run --gpus=all --ipc=host --shm-size=16g --device=/dev/infiniband --privileged"
        " -e NCCL_IB_HCA=mlx5 img\n"
    )
    x = read_input("d", text).parts[0].launches[0]
    assert (x.gpus, x.ipc_host, x.shm_size, x.devices, x.privileged) == ("all", True, "16g", ("/dev/infiniband",), True)


def test_compose_environment_as_a_list_and_as_a_mapping() -> None:
    text = '    environment:\n      - NCCL_IB_DISABLE=1\n      NCCL_P2P_DISABLE: "1"\n'
    found = [(s.name, s.value, s.how) for p in read_input("compose.yml", text).parts for s in p.settings]
    assert found == [("NCCL_IB_DISABLE", "1", "env"), ("NCCL_P2P_DISABLE", "1", "compose environment")]


def test_a_prefix_after_a_shell_list_and_torch_distributed_launch() -> None:
    """Two DDP launches, the second with NCCL_P2P_DISABLE=1, each after `rm -r ...;` and continued with
    `\\` (fixtures/diagnose/real/titan-nvlink-p2p-disable-ddp, stas00/ml-engineering's disable-nvlink.md)."""
    got = read(ROOT / "fixtures/diagnose/real/titan-nvlink-p2p-disable-ddp/evidence-1.txt")
    assert kinds(got) == ["command-line", "command-line"]
    first, second = ([(s.name, s.value, s.how) for s in p.settings] for p in got.parts)
    assert first == [("CUDA_VISIBLE_DEVICES", "0,1", "command prefix")]
    assert ("NCCL_P2P_DISABLE", "1", "command prefix") in second
    assert [(x.launcher, x.gpus) for p in got.parts for x in p.launches] == [("torchrun", "0,1"), ("torchrun", "0,1")]
    assert "--nproc_per_node 2" in got.parts[0].launches[0].text


def test_names_whose_underscores_markdown_ate_are_read_only_as_nccl_names() -> None:
    """`NCCL_NTHREADS=256 NCCL_MIN_NCHANNELS=8 ./build/all_reduce_perf` as an issue's Markdown left it
    (fixtures/diagnose/real/normal-8x5090-pcie-28, NVIDIA/nccl#1639); words that name no variable NCCL
    reads stay unread."""
    got = read(ROOT / "fixtures/diagnose/real/normal-8x5090-pcie-28/evidence-1.txt")
    assert [(s.name, s.value) for s in got.parts[0].settings] == [("NCCL_NTHREADS", "256"), ("NCCL_MIN_NCHANNELS", "8")]
    assert got.parts[0].settings[0].how == "command prefix (underscores lost)"
    assert not read_input("p", "NCCL FOO BAR=1 ./build/all reduce perf -g 8\n").pieces
    assert not read_input("p", "NCCL MIN NCHANNELS=8\n").pieces  # a bare assignment in prose: no command


def test_a_prefix_before_an_nccl_tests_binary_after_cd_and() -> None:
    """A notebook cell from a public NCCL study note (Kaggle, 2 x T4): `!cd DIR && VARS ./build/...` with
    the output piped on; the `cd` names nothing."""
    text = (
        "!cd /kaggle/working/nccl-tests && NCCL_DEBUG=INFO NCCL_ALGO=RING ./build/all_reduce_perf -b 1M -e 1M -g 2 "
        "2>&1 | head -60\n"
    )
    got = read_input("p", text)
    assert [(s.name, s.value) for s in got.parts[0].settings] == [("NCCL_DEBUG", "INFO"), ("NCCL_ALGO", "RING")]


def test_horovodrun_s_host_list_and_its_slots() -> None:
    """horovodrun -H over two hosts (nccl-tests#93, fixtures/diagnose/holdout/s-09): each host with its slots."""
    from topodoctor.evidence.inputs import read_input

    text = "NCCL_DEBUG=info horovodrun -np 4 -H node1:2,node2:2 ./build/all_reduce_perf -b 18M -e 600M -f 2 -g 2"
    (launch,) = read_input("x", text).parts[0].launches
    assert launch.hosts == (("node1", 2), ("node2", 2)) and launch.program == "all_reduce_perf"


def test_a_prefixed_cuda_visible_devices_is_the_bare_run_s_gpus() -> None:
    """nccl#428's run on two of four T4s (fixtures/diagnose/holdout/s-02)."""
    from topodoctor.evidence.inputs import read_input

    text = "# LD_LIBRARY_PATH=/usr/local/lib CUDA_VISIBLE_DEVICES=0,1 ./build/all_reduce_perf  -b 8 -e 128M -f 2 -g 2"
    launches = read_input("x", text).parts[0].launches
    assert [(x.launcher, x.gpus) for x in launches] == [("nccl-tests", "0,1")]


def test_the_nodes_a_launch_spans_as_its_line_says() -> None:
    """composer's --node_rank (llm-foundry#336), torchrun's --nnodes, srun -N, mpirun's -H list (nccl-tests#112)."""
    from topodoctor.evidence.inputs import read_input

    lines = {
        "composer --world_size 16 --node_rank 1 --master_addr 10.0.0.1 --master_port 29500 train.py x.yaml": 2,
        "torchrun --nnodes 4 --nproc_per_node 8 --rdzv_endpoint h1:29500 train.py": 4,
        "srun -N 3 --ntasks-per-node 8 ./build/all_reduce_perf -b 8 -e 1G": 3,
        "mpirun -np 16 -H host1:8,host2:8 -x NCCL_IB_HCA=mlx5_0 ./build/all_reduce_perf -b 1G -e 8G -f 2": 2,
        "torchrun --nproc_per_node 8 train.py": None,
    }
    for text, nodes in lines.items():
        (launch,) = read_input("x", text).parts[0].launches
        assert launch.nodes == nodes, text


def test_the_processes_an_mpi_launcher_starts() -> None:
    """mpirun -np, srun -n, srun -N x --ntasks-per-node; nccl-tests' own -n (iterations) is not one."""
    from topodoctor.evidence.inputs import read_input

    lines = {
        "mpirun -H 10.251.154.148,10.251.154.143 -np 2 ./all_reduce_perf -b 8 -e 128M -f 128 -g 2": 2,
        "srun -N 2 --ntasks-per-node 8 ./build/all_reduce_perf -b 8 -e 1G": 16,
        "srun --ntasks 4 ./build/all_gather_perf -b 8 -e 1G": 4,
        "mpirun -H a,b ./build/all_reduce_perf -b 8 -e 1G -n 20": None,
        "torchrun --nproc_per_node 8 train.py": None,
    }
    for text, processes in lines.items():
        (launch,) = read_input("x", text).parts[0].launches
        assert launch.processes == processes, text
