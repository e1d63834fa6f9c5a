"""Reading files under a root as the kernel lays them out: links resolved inside the root, text kept as is."""

import os

from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.sysfs import parse_rate, parse_state
from tests.helpers import sysfs_builder as b


def test_rate_and_state():
    assert parse_rate("400 Gb/sec (4X NDR)") == 400.0 and parse_rate("2.5 Gb/sec (1X SDR)") == 2.5
    assert parse_state("4: ACTIVE") == "ACTIVE" and parse_state("5: LinkUp") == "LinkUp"
    assert parse_rate(None) is None and parse_state(None) == "UNKNOWN"


def test_builder_uses_kernel_layout(tmp_path):
    root = b.build(b.dgx_h100(), tmp_path)
    link = os.readlink(root / "sys/class/net/ib0")
    assert link.startswith("../../devices/pci0000:") and link.endswith("/net/ib0")
    assert os.readlink(root / "sys/class/infiniband/mlx5_0/device").startswith("../../../0000:")
    assert (root / "sys/class/infiniband/mlx5_0/ports/1/state").read_text() == "4: ACTIVE\n"
    assert (root / "sys/class/net/bond0/bonding/slaves").read_text() == "eno1 eno2\n"
    assert not (root / "sys/class/net/docker0/device").exists()


def test_reader_never_escapes_root_and_handles_absolute_links(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "real").mkdir()
    (tmp_path / "real/hosts").write_text("127.0.0.1 x\n")
    os.symlink("/real/hosts", tmp_path / "etc/hosts")  # absolute: re-rooted under tmp_path
    os.symlink("../../../../../../../../etc/passwd", tmp_path / "etc/evil")
    fs = FsReader(tmp_path)
    assert fs.read("/etc/hosts") == "127.0.0.1 x"
    assert fs.read("/etc/evil") is None
    os.symlink("loop", tmp_path / "loop")
    assert fs.read("/loop/x") is None  # link cycle: no hang
