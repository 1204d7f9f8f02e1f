"""The twenty-first blind set (fixtures/nccl-logs/holdout21, RCCL's output among it), scored once and now a development
set: HIP's 'invalid kernel file' is a library without code for the GPU's target; RCCL's plugin file absent is no
broken plugin; a Chinese post that says a multi-node run is stuck; a refused call from a framework's own source."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs" / "holdout21"


def test_hip_s_invalid_kernel_file_is_no_code_object_for_the_gpu() -> None:
    lead = explained_with(LOGS / "h21-002.log")[
        0
    ]  # RCCL 2.17.1+hip5.7, enqueue.cc "Cuda failure 'invalid kernel file'"
    assert lead.code == "TD060" and "gfx target" in lead.message and "rocminfo" in lead.fix


def test_rccl_s_plugin_file_absent_is_no_broken_plugin() -> None:
    found = explained_with(LOGS / "h21-004.log")  # librccl-net.so: No such file; Init COMPLETE on 4 x MI50
    assert "TD099" not in [f.code for f in found] and not [f for f in found if f.severity == "error"]
    other = explained_with(
        LOGS / "h21-004.log",
        (
            "cannot open shared object file: No such file or directory : when loading librccl-net.so",
            "undefined symbol: ncclNetPlugin_v8 : when loading librccl-net.so",
        ),
    )
    assert "TD099" in [f.code for f in other]


def test_a_chinese_post_that_says_a_multi_node_run_is_stuck() -> None:
    lead = explained_with(LOGS / "h21-003.log")[0]  # "多机多卡分布式训练卡住", Paddle's init nccl context line
    assert lead.code == "TD959" and lead.fix.index("the network between the nodes") < lead.fix.index("(2)")
    plain = explained_with(LOGS / "h21-003.log", ("卡住", "很慢"), ("卡在了", "跑完了"), ("卡在", "跑完"))
    assert not plain or plain[0].code != "TD959"


def test_a_refused_call_from_a_framework_s_own_source_names_the_framework() -> None:
    lead = explained_with(LOGS / "h21-001.log")[0]  # TensorRT-LLM's ncclPlugin: "Attempt to use communicator before"
    assert lead.code == "TD095" and lead.fix.startswith("The call is TensorRT-LLM's")
    plain = explained_with(LOGS / "h21-001.log", ("tensorrt_llm/", "app/"))[0]
    assert plain.code == "TD095" and "TensorRT-LLM" not in plain.fix
