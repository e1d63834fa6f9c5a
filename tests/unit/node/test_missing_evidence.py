"""Missing evidence is not absence: a tree without its address files (/proc/net/route, fib_trie, if_inet6)
says which are missing and judges only what the rest allows. And a mixed-vendor node (Omni-Path hfi1,
mlx4, mlx5, Intel iWARP i40iw; a bond without a mode file) gets vendor-fit advice and plain words."""

from pathlib import Path

import pytest

from nccl_doctor.node import check, probe_node
from nccl_doctor.node.view import node_dict, probe_report
from tests.helpers import sysfs_builder as b

pytestmark = pytest.mark.usefixtures("no_nccl_env")

ADDRESS_FILES = ("/proc/net/route", "/proc/net/fib_trie", "/proc/net/if_inet6")
INTEL = {"vendor": "0x8086", "device": "0x1572", "class": "0x020000", "driver": "i40e", "numa": 0}


def mixed_fabrics() -> dict:
    """Like a fixture tree of an HPC node: hfi1 (100 Gb/s Omni-Path), mlx4 QDR, mlx5 FDR, two i40iw iWARP
    ports (10 and 40 Gb/s) on the ports of the bond ``dmz``, whose second slave is down."""
    pci = {"0000:05:00.0": {"vendor": "0x8086", "device": "0x24f0", "class": "0x020800", "driver": "hfi1",
                            "at": "pci0000:00/0000:00:01.0", "numa": 0},
           "0000:06:00.0": {"vendor": "0x15b3", "device": "0x1003", "class": "0x020700", "driver": "mlx4_core",
                            "at": "pci0000:00/0000:00:02.0", "numa": 0},
           "0000:07:00.0": {"vendor": "0x15b3", "device": "0x1013", "class": "0x020700", "driver": "mlx5_core",
                            "at": "pci0000:00/0000:00:03.0", "numa": 0},
           "0000:08:00.0": {**INTEL, "at": "pci0000:00/0000:00:04.0"},
           "0000:08:00.1": {**INTEL, "at": "pci0000:00/0000:00:04.0"}}
    net = [{"name": "ens8f0", "pci": "0000:08:00.0", "speed": 10000, "addrs": ["10.5.0.7/24"], "master": "dmz"},
           {"name": "ens8f1", "pci": "0000:08:00.1", "speed": 40000, "state": "down", "master": "dmz"},
           {"name": "dmz", "kind": "bond", "slaves": ["ens8f0", "ens8f1"], "addrs": ["10.7.0.7/24"]}]

    def port(rate: str, ll: str = "InfiniBand") -> dict:
        return {1: {"state": "4: ACTIVE", "rate": rate, "ll": ll}}
    rdma = [{"name": "hfi1_0", "pci": "0000:05:00.0", "ports": port("100 Gb/sec (4X EDR)")},
            {"name": "mlx4_0", "pci": "0000:06:00.0", "ports": port("40 Gb/sec (4X QDR)")},
            {"name": "mlx5_0", "pci": "0000:07:00.0", "ports": port("56 Gb/sec (4X FDR)")},
            {"name": "i40iw0", "pci": "0000:08:00.0", "ports": port("10 Gb/sec (1X QDR)", "Ethernet")},
            {"name": "i40iw1", "pci": "0000:08:00.1", "ports": port("40 Gb/sec (4X QDR)", "Ethernet")}]
    return {"hostname": "hpc7", "etc_hosts": "127.0.0.1 localhost\n10.7.0.7 hpc7\n", "pci": pci, "net": net,
            "rdma": rdma, "default": ("dmz", "10.7.0.1")}


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    root = b.build(mixed_fabrics(), tmp_path / "full")
    (root / "sys/class/net/dmz/bonding/mode").unlink()  # a tree from elsewhere: not every file is there
    return root


@pytest.fixture
def no_addresses(mixed: Path) -> Path:
    for f in ADDRESS_FILES:
        (mixed / f.lstrip("/")).unlink()
    return mixed


def test_missing_address_files_are_named_and_nothing_is_judged_absent(no_addresses):
    node = probe_node(no_addresses, {})
    findings = check(node)
    codes = {f.code for f in findings}
    assert "ND224" not in codes and "ND216" not in codes  # unknowable, not absent
    [skip] = [f for f in findings if f.code == "ND001"]
    assert skip.severity.value == "warn" and all(p in skip.message for p in ADDRESS_FILES)
    assert not any(f.severity.value == "fail" for f in findings)
    report = probe_report(node)
    assert "NCCL cannot bootstrap" not in report.summary and "ND001" in report.summary


def test_missing_address_files_still_judge_names(no_addresses):
    """A name that is no interface here fails whatever the addresses; one that exists is not judged."""
    got = {f.code: f for f in check(probe_node(no_addresses, {"NCCL_SOCKET_IFNAME": "eht0",
                                                               "GLOO_SOCKET_IFNAME": "nosuch"}))}
    assert got["ND202"].severity.value == "fail" and "with an IP address" not in got["ND202"].message
    assert got["ND216"].severity.value == "fail"
    fine = {f.code for f in check(probe_node(no_addresses, {"NCCL_SOCKET_IFNAME": "=dmz",
                                                            "GLOO_SOCKET_IFNAME": "dmz"}))}
    assert not fine & {"ND202", "ND216", "ND224"}


def test_gloo_hostname_not_called_foreign_when_addresses_unknown(no_addresses):
    node = probe_node(no_addresses, {})
    assert node.gloo.ifaces == [] and "unknown" in node.gloo.rule
    assert "ND215" not in {f.code for f in check(node)}


def test_address_files_present_but_empty_of_addresses_is_still_absence(tmp_path):
    """The control: the files are there and hold no address but loopback's: absence is judged (NCCL falls
    back to lo, ND206; dmz has no address for Gloo, ND216)."""
    spec = mixed_fabrics()
    for n in spec["net"]:
        n.pop("addrs", None)
    spec.pop("default")
    node = probe_node(b.build(spec, tmp_path), {"GLOO_SOCKET_IFNAME": "dmz"})
    codes = {f.code: f.severity.value for f in check(node)}
    assert codes.get("ND206") == "fail" and codes.get("ND216") == "fail" and "ND001" not in codes


def test_full_tree_has_no_check_skipped(mixed):
    assert "ND001" not in {f.code for f in check(probe_node(mixed, {}))}


def test_bond_without_mode_file_does_not_print_none(mixed):
    [f] = [f for f in check(probe_node(mixed, {})) if f.code == "ND212"]
    assert "None" not in f.message and f.message.startswith("bond dmz has down slave(s) ens8f1")


def test_slow_port_advice_fits_the_vendor(mixed):
    slow = {f.where.device: f for f in check(probe_node(mixed, {})) if f.code == "ND210"}
    assert set(slow) == {"i40iw0:1", "mlx4_0:1", "mlx5_0:1"}
    iwarp = slow["i40iw0:1"].fix or ""
    assert "mlxlink" not in iwarp and "ibv_devinfo -v -d i40iw0" in iwarp and "ibstat i40iw0" in iwarp
    assert "mlxlink" in (slow["mlx4_0:1"].fix or "") and "mlxlink" in (slow["mlx5_0:1"].fix or "")


def test_recommended_hca_says_why_the_other_ports_are_left_out(mixed):
    [line] = [x for x in node_dict(probe_node(mixed, {}))["exports"] if "NCCL_IB_HCA" in x]
    assert line.startswith("export NCCL_IB_HCA==hfi1_0:1  # leaves out ")
    for left in ("mlx4_0:1 at 40 Gb/sec", "mlx5_0:1 at 56 Gb/sec", "i40iw1:1 at 40 Gb/sec"):
        assert left in line
    assert "slower than the 100 Gb/sec of hfi1_0:1" in line


def test_equal_ports_have_no_comment(roots):
    [line] = [x for x in node_dict(probe_node(roots["dgx_h100"], {}))["exports"] if "NCCL_IB_HCA" in x]
    assert "#" not in line
