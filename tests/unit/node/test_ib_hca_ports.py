"""NCCL_IB_HCA with a port on a two-port device (ConnectX-6 VPI, both ports InfiniBand and ACTIVE):
``mlx5_0:1`` keeps port 1 alone, ``mlx5_0:2`` port 2 alone, a bare ``mlx5_0`` both (NCCL's
``matchIfList``: a port given must equal the port, none given matches any)."""

from __future__ import annotations

import pytest

from nccl_doctor.node import probe_node
from tests.helpers import sysfs_builder

CX6 = {"vendor": "0x15b3", "device": "0x101b", "class": "0x020700", "driver": "mlx5_core",
       "at": "pci0000:00/0000:00:01.0", "numa": 0}
PORT = {"state": "4: ACTIVE", "phys": "5: LinkUp", "rate": "200 Gb/sec (4X HDR)", "ll": "InfiniBand"}


def _two_port_node() -> dict:
    return {"hostname": "ib01", "etc_hosts": "127.0.0.1 localhost\n10.0.0.5 ib01\n",
            "pci": {"0000:41:00.0": CX6},
            "net": [{"name": "ens2", "speed": 25000, "addrs": ["10.0.0.5/24"]}],
            "rdma": [{"name": "mlx5_0", "pci": "0000:41:00.0", "ports": {1: PORT, 2: PORT}}],
            "default": ("ens2", "10.0.0.1"), "modules": ["mlx5_core", "mlx5_ib"]}


@pytest.mark.parametrize(("hca", "ports"), [
    ("mlx5_0:1", ["mlx5_0:1"]), ("mlx5_0:2", ["mlx5_0:2"]), ("mlx5_0", ["mlx5_0:1", "mlx5_0:2"]),
    ("=mlx5_0:2", ["mlx5_0:2"]), ("^mlx5_0:1", ["mlx5_0:2"]), ("mlx5_0:3", [])])
def test_a_port_in_nccl_ib_hca_selects_that_port_alone(tmp_path, hca: str, ports: list[str]) -> None:
    node = probe_node(sysfs_builder.build(_two_port_node(), tmp_path), {"NCCL_IB_HCA": hca})
    assert node.nccl_ib.usable == ["mlx5_0:1", "mlx5_0:2"]
    assert node.nccl_ib.ports == ports
