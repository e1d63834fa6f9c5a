"""``check``: every probe check on the fixture nodes, clean by default and per variable set."""


import pytest

from nccl_doctor.node import probe_node
from tests.helpers.probing import ENV, codes, first

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def test_dgx_clean_by_default(roots):
    node = probe_node(roots["dgx_h100"], {})
    assert node.nccl_socket.ifaces == [f"ib{i}" for i in range(8)] and node.nccl_socket.bootstrap == "ib0"
    assert node.nccl_ib.ports == [f"mlx5_{i}:1" for i in range(8)]
    assert node.gloo.ifaces == ["bond0"]
    assert codes(roots["dgx_h100"], sev="warn") == set() and codes(roots["dgx_h100"], sev="fail") == set()


@pytest.mark.parametrize("env, code, sev", [
    ({"NCCL_SOCKET_IFNAME": "eth0"}, "ND202", "fail"),
    ({"NCCL_SOCKET_IFNAME": "=ib"}, "ND202", "fail"),
    ({"NCCL_SOCKET_IFNAME": "bond"}, "ND201", "warn"),
    ({"NCCL_SOCKET_IFNAME": "docker"}, "ND203", "fail"),  # docker0 has no carrier: not running
    ({"NCCL_SOCKET_IFNAME": "b"}, "ND204", "warn"),
    ({"NCCL_SOCKET_IFNAME": "=^ib0"}, "ND204", "warn"),
    ({"NCCL_IB_DISABLE": "1"}, "ND207", "fail"),
    ({"NCCL_NET": "Socket"}, "ND207", "fail"),
    ({"NCCL_IB_DISABLE": "true"}, "ND217", "warn"),
    ({"NCCL_IB_HCA": "=mlx5_9"}, "ND208", "fail"),
    ({"NCCL_NET": "IBB"}, "ND222", "fail"),  # close to IB: a typo, NCCL knows no such network
    ({"NCCL_NET": "MyVendorNet"}, "ND222", "warn"),  # maybe a plugin we do not know
    ({"NCCL_NET_GDR_LEVEL": "pxb"}, "ND218", "warn"),
    ({"NCCL_NET_GDR_LEVEL": "NODE"}, "ND218", "warn"),
    ({"NCCL_DEBUG": "VERBOSE"}, "ND218", "warn"),
    ({"NCCL_CROSS_NIC": "3"}, "ND218", "warn"),
    ({"NCCL_P2P_DISABLE": "1"}, "ND221", "warn"),
    ({"NCCL_SHM_DISABLE": "1"}, "ND221", "warn"),
    ({"NCCL_SOCKET_IFNAM": "ib"}, "ND219", "warn"),
    ({"NCCL_ASYNC_ERROR_HANDLING": "1"}, "ND219", "warn"),
    ({"GLOO_SOCKET_IFNAME": "ib"}, "ND216", "fail"),
    ({"GLOO_SOCKET_IFNAME": "docker0"}, "ND216", "warn"),
])
def test_env_findings_on_dgx(roots, env, code, sev):
    assert code in codes(roots["dgx_h100"], env, sev)


def test_whitespace_in_values_is_shown(dgx):
    assert "NCCL_SOCKET_IFNAME='ib0 '" in first(probe_node(dgx, {**ENV, "NCCL_SOCKET_IFNAME": "ib0 "}), "ND202").message
    assert "NCCL_IB_HCA='mlx5 '" in first(probe_node(dgx, {**ENV, "NCCL_IB_HCA": "mlx5 "}), "ND208").message
