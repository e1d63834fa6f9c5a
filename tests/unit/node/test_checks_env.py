"""Variable checks: values NCCL reads otherwise, names nothing reads (with fixes this tool accepts),
nccl.conf files read byte for byte."""


import pytest

from nccl_doctor.node import check, probe_node
from nccl_doctor.node.view import probe_report
from tests.helpers import sysfs_builder as b
from tests.helpers.probing import ENV, dgx_conf, first

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def test_ib_disable_true_keeps_ib(roots):
    node = probe_node(roots["dgx_h100"], {"NCCL_IB_DISABLE": "true"})
    assert node.nccl_ib.ports and node.nccl_ib.disabled_by is None
    msg = next(f.message for f in check(node) if f.code == "ND217")
    assert "IB stays ENABLED" in msg


def test_conf_file_injects_quoted_ifname(tmp_path):
    spec = b.dgx_h100()
    spec["files"] = {"/etc/nccl.conf": 'NCCL_SOCKET_IFNAME="ib"\n'}
    root = b.build(spec, tmp_path)
    node = probe_node(root, {})
    assert node.nccl_socket.ifaces == []
    got = {(f.code, f.severity.value) for f in check(node)}
    assert {("ND202", "fail"), ("ND204", "warn"), ("ND220", "warn")} <= got
    assert probe_node(root, {"NCCL_SOCKET_IFNAME": "ib"}).nccl_socket.ifaces  # environment wins


def test_missing_nccl_conf_file_warns(roots):
    fs = [f for f in check(probe_node(roots["dgx_h100"], {"NCCL_CONF_FILE": "/nonexist/nccl.conf"})) if f.code == "ND220"]
    assert [(f.severity.value, f.where.file) for f in fs] == [("warn", "/nonexist/nccl.conf")]
    assert "NCCL ignores it" in fs[0].message


def test_typo_next_to_correct_variable_only_removes_the_typo(dgx):
    node = probe_node(dgx, {**ENV, "NCCL_SOCKET_IFNAME": "ib0", "NCCL_SOCKET_IFNAMe": "x"})
    f = first(node, "ND219")
    assert f.fix == "unset NCCL_SOCKET_IFNAMe" and "already set" in f.message


@pytest.mark.parametrize("name, value, bad", [
    ("NCCL_SOCKET_IFNAMES", "eth0", "ND202"),  # no eth0 here
    ("NCCL_IB_DISABLED", "1", "ND207"),  # would turn IB off with 8 active ports
])
def test_typo_fix_never_recommends_a_rejected_value(dgx, name, value, bad):
    node = probe_node(dgx, {**ENV, name: value})
    f = first(node, "ND219")
    guess = name[:-1]
    assert f"{guess}={value}" not in f.fix and f.fix.startswith(f"unset {name}")
    assert bad in f.message


def test_typo_with_good_value_still_renames(dgx):
    f = first(probe_node(dgx, {**ENV, "NCCL_SOCKET_IFNAM": "ib"}), "ND219")
    assert f.fix == "export NCCL_SOCKET_IFNAME=ib; unset NCCL_SOCKET_IFNAM"


def test_spaces_around_equals_in_conf(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME = ib0\n"), ENV)
    f = first(node, "ND219")
    assert "spaces around '='" in f.message and "/etc/nccl.conf line 2" in f.message
    assert "did you mean NCCL_SOCKET_IFNAME?" not in f.message and "unset" not in f.fix
    assert "NCCL_SOCKET_IFNAME=ib0" in f.fix and "line 2" in f.fix and f.where.file == "/etc/nccl.conf"


def test_typo_in_conf_names_file_and_line(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "# site\nNCCL_SOCKET_IFNAM=ib\n"), ENV)
    f = first(node, "ND219")
    assert "/etc/nccl.conf line 2" in f.message and not f.fix.startswith("unset")
    assert "NCCL_SOCKET_IFNAME=ib" in f.fix and f.where.file == "/etc/nccl.conf"


def test_not_integer_fix_agrees_with_ib_disabled(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "NCCL_IB_DISABLE=1 # turn off\n"), ENV)
    nd207, nd217 = first(node, "ND207", "fail"), first(node, "ND217")
    assert "NCCL_IB_DISABLE=0" in nd207.fix
    assert "export NCCL_IB_DISABLE=1" not in nd217.fix and "to NCCL_IB_DISABLE=1" not in nd217.fix
    assert "export NCCL_IB_DISABLE=0" in nd217.fix and "line 1 of /etc/nccl.conf" in nd217.fix
    assert "column" in nd217.message  # '#' is a comment only at the start of a line


def test_crlf_conf_is_judged_as_nccl_reads_it(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "NCCL_SOCKET_IFNAME=bond0\r\nNCCL_IB_HCA=mlx5\r\n"), ENV)
    assert node.settings.get("NCCL_SOCKET_IFNAME") == "bond0\r" and node.nccl_socket.ifaces == []
    assert node.nccl_ib.ports == []
    crlf = [f for f in check(node) if "carriage return" in f.message]
    assert crlf and crlf[0].where.file == "/etc/nccl.conf"
    assert "sed -i 's/\\r$//' /etc/nccl.conf" in crlf[0].fix and "dos2unix" in crlf[0].fix
    assert "'bond0\\r'" in first(node, "ND202", "fail").message
    assert "'mlx5\\r'" in first(node, "ND208", "fail").message
    assert probe_report(node).verdict.value == "fail"


def test_gloo_typo_flagged(dgx):
    f = first(probe_node(dgx, {**ENV, "GLOO_SOCKET_IFNAMES": "bond0"}), "ND219")
    assert "GLOO_SOCKET_IFNAME" in f.message and f.fix == "export GLOO_SOCKET_IFNAME=bond0; unset GLOO_SOCKET_IFNAMES"
