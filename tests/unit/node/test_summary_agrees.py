"""The ND200 summary never claims a choice that a FAIL of the same report says does not exist."""

import pytest

from nccl_doctor.node import check, probe_node
from nccl_doctor.node.view import probe_report

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def _by_code(root, env):
    return {f.code: f for f in check(probe_node(root, env))}


@pytest.mark.parametrize("value", ["nosuch", "ens5,nosuch"])
def test_gloo_ifname_naming_nothing_is_not_summarised_as_gloos_choice(roots, value):
    got = _by_code(roots["cloud_vm"], {"GLOO_SOCKET_IFNAME": value})
    assert got["ND216"].severity.value == "fail"
    summary = got["ND200"].message
    assert f"Gloo: {value}" not in summary and "nosuch (GLOO_SOCKET_IFNAME)" not in summary
    assert "Gloo" not in summary and "cannot" not in summary  # a PASS never carries a failure: ND216 says it
    assert summary.startswith("NCCL bootstrap: ens5")


def test_gloo_ifname_that_exists_is_still_summarised(roots):
    got = _by_code(roots["cloud_vm"], {"GLOO_SOCKET_IFNAME": "ens5"})
    assert "ND216" not in got and got["ND200"].message.endswith("Gloo: ens5 (GLOO_SOCKET_IFNAME)")


def test_ib_hca_selecting_nothing_is_named_in_the_summary(roots):
    """ND208 FAILs (NCCL_IB_HCA keeps no active port): the summary says sockets, and why."""
    got = _by_code(roots["degraded_ib"], {"NCCL_IB_HCA": "mlx5_9"})
    assert got["ND208"].severity.value == "fail"
    summary = got["ND200"].message
    assert "data: IB ports" not in summary and "NCCL_IB_HCA selects none of the active IB ports; see ND208" in summary


def test_socket_ifname_naming_nothing_has_no_summary_line(roots):
    node = probe_node(roots["cloud_vm"], {"NCCL_SOCKET_IFNAME": "eht0"})
    report = probe_report(node)
    assert "ND200" not in {f.code for f in report.findings} and "ND202" in report.summary
