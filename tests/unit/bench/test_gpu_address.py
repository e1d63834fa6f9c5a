"""A rank's GPU as sysfs names it (``bench.rails.gpu_pci_address``, issue 21 point 15): torch's device
properties read with getattr (an AttributeError used to escape ``_rank_nics``' guard on a torch without
them), then the UUID through the driver's files, then the one GPU the process sees on the bus. The first
GPU run's torch 2.11 facts (``fixtures/gpu/h200-2026-12-04/torch-facts.out``) are the properties."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from nccl_doctor.bench.rails import BusGpus, bus_gpus, gpu_pci_address, rank_gpu_address
from nccl_doctor.node.fsreader import FsReader
from tests.helpers import sysfs_builder as b

FACTS = json.loads((Path(__file__).parents[3] / "fixtures/gpu/h200-2026-12-04/torch-facts.out").read_text())
H200_BDF = "0000:00:06.0"  # env-sys.out: the machine's one NVIDIA PCI function
H200 = {"vendor": "0x10de", "device": "0x2335", "class": "0x030200", "driver": "nvidia", "at": "pci0000:00"}


def torch_2_11():
    return SimpleNamespace(**FACTS["pci"], uuid=FACTS["uuid"], name=FACTS["name"])


def without_pci_fields():
    return SimpleNamespace(uuid=FACTS["uuid"], name=FACTS["name"])


def never():
    raise AssertionError("the bus is read only when the properties lack the address")


def one_h200(tmp_path, driver_files=True, more=0):
    pci = {H200_BDF: H200, **{f"0000:{0x10 + k:02x}:00.0": H200 for k in range(more)}}
    spec = {"hostname": "vm", "pci": pci}
    if driver_files:
        spec["nvidia_gpus"] = {H200_BDF: {"uuid": f"GPU-{FACTS['uuid']}", "minor": 0}}
    return b.build(spec, tmp_path)


def test_torch_2_11_properties_give_the_address_sysfs_has():
    assert gpu_pci_address(torch_2_11(), never) == H200_BDF


def test_without_the_pci_fields_the_uuid_finds_it_through_the_driver(tmp_path):
    root = one_h200(tmp_path, more=3)  # four GPUs on the bus: only the UUID says which
    assert gpu_pci_address(without_pci_fields(), lambda: bus_gpus(FsReader(root), None)) == H200_BDF
    assert rank_gpu_address(without_pci_fields(), {}, str(root)) == H200_BDF


def test_without_pci_fields_or_uuid_the_one_visible_gpu_is_it(tmp_path):
    root = one_h200(tmp_path, driver_files=False, more=3)
    bare = SimpleNamespace(name="NVIDIA H200")
    assert gpu_pci_address(bare, lambda: bus_gpus(FsReader(root), "0")) == H200_BDF  # CUDA_VISIBLE_DEVICES=0
    assert gpu_pci_address(bare, lambda: bus_gpus(FsReader(root), None)) is None  # four: no way to tell


@pytest.mark.parametrize("props", [SimpleNamespace(pci_domain_id=None, pci_bus_id=0, pci_device_id=6),
                                   SimpleNamespace(pci_domain_id=0, pci_bus_id="0", pci_device_id=6),
                                   object()])
def test_partial_or_odd_properties_never_raise(props):
    assert gpu_pci_address(props, BusGpus) is None
