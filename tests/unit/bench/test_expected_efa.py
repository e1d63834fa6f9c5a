"""The EFA yardstick from the ports the probe sees (``bench.expected``): a p5 drives several EFA ports
per GPU (aws-ofi-nccl's rails), so one rank pair's figure is their sum, not one 100 Gb/s port."""

import pytest

from nccl_doctor.bench.expected import efa_ports_per_gpu, expected_bandwidth
from nccl_doctor.node import probe_node
from tests.helpers import sysfs_builder as b


def p5_with(efa_per_gpu: int) -> dict:
    """``sysfs_builder.p5_node`` with ``efa_per_gpu`` EFA devices beside each of its 8 H100s."""
    spec = b.p5_node()
    for k in range(8):
        bus = 0x10 + 0x20 * k
        for j in range(1, efa_per_gpu):
            addr = f"0000:{bus:02x}:{0x1c + 2 * j:02x}.0"
            spec["pci"][addr] = {**spec["pci"][f"0000:{bus:02x}:1c.0"]}
            spec["rdma"].append({"name": f"rdmap{bus}s{0x1c + 2 * j}", "pci": addr, "ports": {1: {
                "state": "4: ACTIVE", "phys": "5: LinkUp", "rate": "100 Gb/sec (4X EDR)", "ll": "Unknown"}}})
    return spec


def test_p5_one_rank_pair_drives_four_efa_ports(tmp_path):
    """32 x 100 Gb/s EFA for 8 GPUs: 50 GB/s per GPU, where the old yardstick said 12.5 (one port), so a
    GPU at a quarter of its rate looked at full speed."""
    e = expected_bandwidth(probe_node(b.build(p5_with(4), tmp_path), {}), "nccl")
    assert len(e.ifaces) == 32 and e.inter_gbps == pytest.approx(32 * 100 / 8)
    assert e.per_rank_gbps == pytest.approx(4 * 100 / 8)
    assert "one rank pair uses 4 (the plugin's rails: 32 ports for 8 GPUs)" in e.inter_basis


def test_one_efa_port_per_gpu_or_fewer_stays_one_port(tmp_path):
    e = expected_bandwidth(probe_node(b.build(b.p5_node(), tmp_path), {}), "nccl")  # 8 EFA, 8 GPUs
    assert e.per_rank_gbps == pytest.approx(100 / 8) and "one rank pair uses one" in e.inter_basis
    assert [efa_ports_per_gpu(4, 8), efa_ports_per_gpu(32, 8), efa_ports_per_gpu(4, 0)] == [1, 4, 1]
