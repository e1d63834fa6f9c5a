"""The probe lists the GPUs CUDA will show, not every NVIDIA GPU on the bus (issue 21 point 16): indices in
nvidia-smi's (PCI bus) order, UUIDs through the driver's ``/proc/driver/nvidia/gpus/<bdf>/information``, MIG
devices through their GPU; trees in the kernel's and the driver's layout (``sysfs_builder``)."""

from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.probe import probe_node
from nccl_doctor.node.sysfs import read_gpus
from tests.helpers import sysfs_builder as b

UUIDS = [f"GPU-{k}f6500d3-939e-034a-0ef8-b6d248daf52c" for k in range(8)]  # one per GPU, prefix-unique


def dgx(with_driver_files=True, mig=()):
    spec = b.dgx_h100()
    gpus = sorted(bdf for bdf, p in spec["pci"].items() if p["vendor"] == "0x10de")
    if with_driver_files:
        spec["nvidia_gpus"] = {bdf: {"uuid": UUIDS[k], "minor": k, "mig": [(1, 0)] if k in mig else []}
                               for k, bdf in enumerate(gpus)}
    return spec, gpus


def addresses(root, cvd):
    return [g.pci.address for g in read_gpus(FsReader(root), cvd)]


def test_unset_is_every_gpu_and_empty_is_none(tmp_path):
    spec, gpus = dgx()
    root = b.build(spec, tmp_path)
    assert addresses(root, None) == gpus
    assert addresses(root, "") == [] and addresses(root, "NoDevFiles") == []


def test_indices_are_the_bus_order_in_cudas_order(tmp_path):
    spec, gpus = dgx()
    root = b.build(spec, tmp_path)
    assert addresses(root, "2,1") == [gpus[2], gpus[1]]
    assert addresses(root, "0,2,-1,1") == [gpus[0], gpus[2]]  # CUDA stops at the invalid entry
    assert addresses(root, "6,9,7") == [gpus[6]]  # no GPU 9: it and what follows are hidden


def test_uuids_and_unique_prefixes_through_the_driver_files(tmp_path):
    spec, gpus = dgx()
    root = b.build(spec, tmp_path)
    assert addresses(root, f"{UUIDS[5]},{UUIDS[3]}") == [gpus[5], gpus[3]]
    assert addresses(root, "GPU-4f65") == [gpus[4]]
    assert addresses(root, "GPU-,GPU-1f65") == []  # a prefix of every UUID names no one GPU


def test_uuids_without_the_driver_files_keep_the_bus(tmp_path):
    spec, gpus = dgx(with_driver_files=False)
    root = b.build(spec, tmp_path)
    assert addresses(root, UUIDS[5]) == gpus


def test_a_mig_device_is_its_gpu(tmp_path):
    spec, gpus = dgx(mig=(3,))
    root = b.build(spec, tmp_path)
    assert addresses(root, "MIG-4f2a1c3e-5b6d-5e7f-8a9b-0c1d2e3f4a5b,MIG-7d8e9f0a-1b2c-5d3e-4f5a-6b7c8d9e0f1a") \
        == [gpus[3]]  # the one GPU with MIG instances
    assert addresses(root, f"MIG-{UUIDS[6]}/1/0") == [gpus[6]]  # the R450 form names its GPU


def test_a_mig_device_on_one_of_several_mig_gpus_keeps_the_candidates(tmp_path):
    spec, gpus = dgx(mig=(2, 5))
    root = b.build(spec, tmp_path)  # only NVML knows which one is the parent
    assert addresses(root, "MIG-4f2a1c3e-5b6d-5e7f-8a9b-0c1d2e3f4a5b") == [gpus[2], gpus[5]]


def test_the_probe_applies_the_environments_cuda_visible_devices(tmp_path):
    spec, gpus = dgx()
    root = b.build(spec, tmp_path)
    node = probe_node(root, {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert [g.pci.address for g in node.facts.gpus] == gpus[:2]
    assert all(g.nearest_nic for g in node.facts.gpus)  # still matched to their NICs
    assert len(probe_node(root, {}).facts.gpus) == 8
