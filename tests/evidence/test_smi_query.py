"""nvidia-smi -q's sections: PCIe, virtualization, clocks event reasons, ECC, remapping, fabric."""

from __future__ import annotations

from evidence_support import EVIDENCE, only, read

from topodoctor.evidence.inputs import read_input


def test_query_sections_of_h200_x4() -> None:
    got = read(EVIDENCE / "h200-x4" / "smi_q.txt")
    part = got.parts[only(got, "smi-query")]
    assert (part.driver_version, part.cuda_version) == ("580.159.04", "13.0")
    assert len(part.gpus) == 4
    g = part.gpus[0]
    assert (g.name, g.bus_id, g.uuid) == ("NVIDIA H200", "00000000:00:06.0", "GPU-00000000-0000-0000-0000-000000000001")
    assert (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max) == (5, 5, 16, 16)
    assert g.virtualization == "Pass-Through" and g.fabric_state == "Completed / Success"
    assert g.ecc_uncorrected == 0 and g.remapping_pending is False and g.remapping_failed is False
    assert g.clock_event_reasons == ()  # only Idle is active, and idle is not a slowdown


def test_old_drivers_throttle_reasons_and_a_downtrained_link() -> None:
    text = (
        "==============NVSMI LOG==============\n\nDriver Version                            : 470.82.01\n"
        "CUDA Version                              : 11.4\n\nAttached GPUs                             : 1\n"
        "GPU 00000000:3B:00.0\n    Product Name                          : Tesla V100-PCIE-32GB\n"
        "    PCI\n        GPU Link Info\n            PCIe Generation\n                Max                       : 3\n"
        "                Current                   : 1\n            Link Width\n"
        "                Max                       : 16x\n"
        "                Current                   : 8x\n    Clocks Throttle Reasons\n"
        "        Idle                              : Not Active\n        HW Slowdown                       : Active\n"
        "        SW Thermal Slowdown               : Not Active\n"
    )
    got = read_input("q", text)
    g = got.parts[0].gpus[0]
    assert (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max) == (1, 3, 8, 16)
    assert g.clock_event_reasons == ("HW Slowdown",) and got.parts[0].driver_version == "470.82.01"


def test_an_older_drivers_query_of_one_gpu_cut_in_its_pci_section() -> None:
    got = read(EVIDENCE / "smi-query-v100-driver410-cut.txt")
    g = got.parts[only(got, "smi-query")].gpus[0]
    assert (g.name, g.bus_id, g.virtualization) == ("Tesla V100-SXM2-16GB", "00000000:8A:00.0", "None")
    assert g.pcie_gen is None and g.ecc_uncorrected is None  # the paste ends before them: not shown


def test_the_power_limit_in_force_and_its_default() -> None:
    got = read(EVIDENCE / "h200-x1" / "smi-q.txt")
    g = got.parts[only(got, "smi-query")].gpus[0]
    assert (g.power_limit_w, g.power_default_w) == (700.0, 700.0)  # the GPU section's, not the module's
    old = (  # before 535: Power Limit and Enforced Power Limit (the one in force) under Power Readings
        "GPU 00000000:3B:00.0\n    Product Name                          : Tesla V100-PCIE-32GB\n"
        "    Power Readings\n        Power Management                  : Supported\n"
        "        Power Draw                        : 38.46 W\n        Power Limit                       : 250.00 W\n"
        "        Default Power Limit               : 250.00 W\n        Enforced Power Limit              : 150.00 W\n"
        "        Min Power Limit                   : 100.00 W\n        Max Power Limit                   : 250.00 W\n"
    )
    v = read_input("q", old).parts[0].gpus[0]
    assert (v.power_limit_w, v.power_default_w) == (150.0, 250.0)
