"""NCCL/Gloo env semantics as the libraries implement them (nccl-facts.md B)."""

import os

import pytest

from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.model import Address, Interface, RdmaDevice, RdmaPort, Setting, Settings
from nccl_doctor.node.ncclenv import (
    classify_net,
    did_you_mean,
    effective_settings,
    gdr_level,
    gloo_ifaces,
    hosts_lookup,
    match_if_list,
    nccl_ib_ports,
    nccl_socket_ifaces,
    overmatching_prefixes,
    parse_c_int,
    parse_conf,
    parse_if_list,
    user_conf_path,
)


@pytest.mark.parametrize("text, value, clean", [
    ("1", 1, True), ("0", 0, True), ("true", 0, False), ("yes", 0, False), ("0x10", 16, True),
    ("010", 8, True), ("-1", -1, True), ("2 ", 2, False), ("", 0, False), (" 3", 3, True), ("1abc", 1, False),
])
def test_parse_c_int_is_strtoll(text, value, clean):
    assert parse_c_int(text) == (value, clean)


@pytest.mark.parametrize("value, name, keep", [
    ("eth", "eth0", True), ("eth", "eth10", True), ("=eth0", "eth0", True), ("=eth0", "eth01", False),
    ("^docker,lo", "docker0", False), ("^docker,lo", "eth0", True), ("^=lo", "lo", False), ("^=lo", "lo0", True),
    ("=^lo", "lo", False),  # '=^' is the exact name '^lo', so nothing named lo matches
    ("ib0:1", "ib0", True),  # the port is ignored for sockets
    ("eth0,ib", "ib3", True), ("eth0,ib", "enp1", False),
])
def test_match_if_list(value, name, keep):
    assert match_if_list(name, -1, parse_if_list(value)) is keep


def test_hca_ports():
    lst = parse_if_list("=mlx5_0:1,mlx5_1")
    assert match_if_list("mlx5_0", 1, lst) and not match_if_list("mlx5_0", 2, lst)
    assert match_if_list("mlx5_1", 2, lst) and not match_if_list("mlx5_10", 1, lst)
    assert overmatching_prefixes(parse_if_list("mlx5_1"), ["mlx5_1", "mlx5_10", "mlx5_2"]) == {"mlx5_1": ["mlx5_1", "mlx5_10"]}
    assert overmatching_prefixes(parse_if_list("=mlx5_1"), ["mlx5_1", "mlx5_10"]) == {}


def _iface(name, idx, addrs=(), running=True, kind="ethernet"):
    a = [Address("inet6" if ":" in x else "inet", x.split("/")[0], int(x.split("/")[1])) for x in addrs]
    return Interface(name=name, ifindex=idx, iflink=idx, arphrd=1, kind=kind, running=running, up=running,
                     addresses=a)


def _settings(**kw):
    return Settings({k: Setting(k, v, "environment") for k, v in kw.items()})


IFS = [_iface("lo", 1, ["127.0.0.1/8", "::1/128"], kind="loopback"), _iface("eno1", 2, ["192.168.1.5/24"]),
       _iface("docker0", 3, ["172.17.0.1/16"]), _iface("ib0", 4, ["10.1.0.5/24"]),
       _iface("ib1", 5, ["10.1.1.5/24"], running=False), _iface("eth6", 6, ["fd00::6/64"])]


@pytest.mark.parametrize("env, ifaces, rule", [
    ({}, ["ib0"], "default: names starting with ib"),  # ib1 is down: 2.28+ skips it
    ({"NCCL_SOCKET_IFNAME": "e"}, ["ib0"], "default: names starting with ib"),  # 1 char: ignored
    ({"NCCL_SOCKET_IFNAME": "eno"}, ["eno1"], "NCCL_SOCKET_IFNAME"),
    ({"NCCL_SOCKET_IFNAME": "^ib,lo"}, ["eno1", "docker0", "eth6"], "NCCL_SOCKET_IFNAME"),
    ({"NCCL_SOCKET_IFNAME": "eth0"}, [], "NCCL_SOCKET_IFNAME"),
    ({"NCCL_SOCKET_IFNAME": "ib1"}, [], "NCCL_SOCKET_IFNAME"),
    ({"NCCL_SOCKET_IFNAME": ""}, ["ib0"], "default: names starting with ib"),  # empty = unset
])
def test_socket_choice(env, ifaces, rule):
    sc = nccl_socket_ifaces(IFS, _settings(**env))
    assert sc.ifaces == ifaces and sc.rule == rule


def test_socket_default_without_ib_skips_docker_and_lo_and_orders_ipv4_first():
    ifs = [i for i in IFS if not i.name.startswith("ib")]
    assert nccl_socket_ifaces(ifs, _settings()).ifaces == ["eno1", "eth6"]
    assert nccl_socket_ifaces(ifs[:1] + ifs[2:3], _settings()).ifaces == ["docker0"]  # then docker
    assert nccl_socket_ifaces(ifs[:1], _settings()).ifaces == ["lo"]  # then lo (IPv4 only: ::1 skipped)
    sc = nccl_socket_ifaces(IFS, _settings(NCCL_SOCKET_IFNAME="ib1"))
    assert sc.matched_not_running == ["ib1"]
    assert nccl_socket_ifaces(ifs, _settings(NCCL_SOCKET_FAMILY="AF_INET6")).ifaces == ["eth6"]


def test_comm_id_subnet_rule():
    ifs = [IFS[0], _iface("eno1", 2, ["192.168.1.5/24"]), _iface("enp2", 3, ["10.9.0.5/16"])]
    sc = nccl_socket_ifaces(ifs, _settings(NCCL_COMM_ID="10.9.3.3:29500"))
    assert sc.ifaces == ["enp2"] and "NCCL_COMM_ID" in sc.rule


def _dev(name, state="ACTIVE", ll="InfiniBand"):
    return RdmaDevice(name=name, driver="mlx5_core", pci=None, netdevs=[],
                      ports=[RdmaPort(name, 1, state, "LinkUp", "400 Gb/sec (4X NDR)", 400.0, ll)])


def test_ib_ports_selection_and_disable():
    devs = [_dev("mlx5_10"), _dev("mlx5_2"), _dev("mlx5_1", state="DOWN"), _dev("efa0", ll="Unknown")]
    assert nccl_ib_ports(devs, _settings()).ports == ["mlx5_2:1", "mlx5_10:1"]  # natural order, ACTIVE only
    assert nccl_ib_ports(devs, _settings(NCCL_IB_HCA="mlx5_1")).ports == ["mlx5_10:1"]  # prefix!
    assert nccl_ib_ports(devs, _settings(NCCL_IB_HCA="=mlx5_1")).ports == []
    assert nccl_ib_ports(devs, _settings(NCCL_IB_HCA="^=mlx5_10")).ports == ["mlx5_2:1"]
    assert nccl_ib_ports(devs, _settings(NCCL_IB_DISABLE="1")).disabled_by == "NCCL_IB_DISABLE=1"
    ch = nccl_ib_ports(devs, _settings(NCCL_IB_DISABLE="true"))  # strtoll("true") == 0: IB stays on
    assert ch.disabled_by is None and ch.ports
    assert nccl_ib_ports(devs, _settings(NCCL_NET="Socket")).ports == []
    assert nccl_ib_ports(devs, _settings(NCCL_NET="ib")).ports  # case-insensitive (2.13+)


def test_gdr_level_names_are_case_sensitive():
    assert gdr_level("PXB") == "PXB" and gdr_level("2") == "PXB" and gdr_level("7") == "SYS"
    assert gdr_level("pxb") is None and gdr_level("NODE") is None


def test_did_you_mean():
    assert did_you_mean("NCCL_SOCKET_IFNAM") == "NCCL_SOCKET_IFNAME"
    assert did_you_mean("NCCL_IB_DISABLED") == "NCCL_IB_DISABLE"
    assert did_you_mean("NCCL_SOCKET_IFNAME") is None and did_you_mean("NCCL_COMPLETELY_NEW_THING") is None


def test_conf_files_layering(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_text("# site\nNCCL_SOCKET_IFNAME=\"ib\"\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\n")
    (tmp_path / "home/u").mkdir(parents=True)
    (tmp_path / "home/u/.nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    (tmp_path / "x.conf").write_text("NCCL_IB_HCA=mlx5_0\n")
    fs = FsReader(tmp_path)
    s = effective_settings({"HOME": "/home/u", "NCCL_DEBUG": "TRACE"}, fs)
    assert s.get("NCCL_DEBUG") == "TRACE" and s.source("NCCL_DEBUG") == "environment"
    assert s.get("NCCL_SOCKET_IFNAME") == '"ib"' and s.source("NCCL_SOCKET_IFNAME") == "/etc/nccl.conf"
    assert s.get("NCCL_IB_HCA") == "mlx5"
    s2 = effective_settings({"HOME": "/home/u", "NCCL_CONF_FILE": "/x.conf"}, fs)
    assert s2.get("NCCL_IB_HCA") == "mlx5_0" and s2.get("NCCL_DEBUG") == "WARN"  # ~/.nccl.conf skipped
    assert parse_conf("A = b\n#C=d\nnoequals\n") == [("A ", " b")]


def test_gloo_choice():
    hosts = "127.0.0.1 localhost\n127.0.1.1 n1\n192.168.1.5 n2 n2.example\n"
    assert hosts_lookup(hosts, "n2.example") == "192.168.1.5"
    assert gloo_ifaces(IFS, _settings(), "n1", hosts).ifaces == ["lo"]
    assert gloo_ifaces(IFS, _settings(), "n2", hosts).ifaces == ["eno1"]
    g = gloo_ifaces(IFS, _settings(), "n3", hosts)
    assert g.ifaces == [] and "not in /etc/hosts" in g.rule
    g = gloo_ifaces(IFS, _settings(GLOO_SOCKET_IFNAME="eno1,ib9,eno"), "n1", hosts)
    assert g.ifaces == ["eno1", "ib9", "eno"] and g.missing == ["ib9", "eno"]  # exact names only
    assert gloo_ifaces(IFS, _settings(GLOO_SOCKET_IFNAME="ib1"), "n1", hosts).down == ["ib1"]


def test_classify_net_names():
    """NCCL_NET: strcasecmp against IB, Socket and plugin names; anything else fails init."""
    kinds = {v: (classify_net(v).kind, classify_net(v).meant) for v in
             ("IB", "ib", "Socket", "SOCKET", "Sockets", "IBB", "tcp", "RoCE", "efa", "UCX", "IBext_v8",
              "AWS Libfabric", "MyVendorNet")}
    assert kinds == {"IB": ("ib", None), "ib": ("ib", None), "Socket": ("socket", None), "SOCKET": ("socket", None),
                     "Sockets": ("typo", "Socket"), "IBB": ("typo", "IB"), "tcp": ("typo", "Socket"),
                     "RoCE": ("typo", "IB"), "efa": ("typo", "Libfabric"), "UCX": ("plugin", None),
                     "IBext_v8": ("plugin", None), "AWS Libfabric": ("plugin", None), "MyVendorNet": ("unknown", None)}
    assert classify_net("IBext_v8").plugin == "ibext" and classify_net("ucx-rma").plugin == "ucx-rma"


def test_missing_conf_file_is_recorded(tmp_path):
    (tmp_path / "home/u").mkdir(parents=True)
    (tmp_path / "home/u/.nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    s = effective_settings({"HOME": "/home/u", "NCCL_CONF_FILE": "/nope.conf"}, FsReader(tmp_path))
    assert s.missing_conf_file == "/nope.conf" and s.conf_files == [] and s.get("NCCL_DEBUG") is None
    assert effective_settings({"HOME": "/home/u"}, FsReader(tmp_path)).missing_conf_file is None


# -- nccl.conf read byte for byte, and ~/.nccl.conf found as NCCL finds it ----------------------------


def test_reader_keeps_carriage_returns(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_bytes(b"NCCL_SOCKET_IFNAME=bond0\r\nNCCL_IB_HCA=mlx5\r\n")
    assert FsReader(tmp_path).read("/etc/nccl.conf") == "NCCL_SOCKET_IFNAME=bond0\r\nNCCL_IB_HCA=mlx5\r"
    assert parse_conf("A=b\r\n # c=d\n#e=f\nG = h \n") == [("A", "b\r"), ("G ", " h ")]


def test_user_conf_comes_from_passwd_on_the_live_root(tmp_path):
    import pwd
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert user_conf_path({"HOME": "/elsewhere"}, FsReader("/")) == home.rstrip("/") + "/.nccl.conf"
    assert user_conf_path({"HOME": "/home/u"}, FsReader(tmp_path)) == "/home/u/.nccl.conf"  # a snapshot
    (tmp_path / "home/u").mkdir(parents=True)
    (tmp_path / "home/u/.nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    assert effective_settings({"HOME": "/home/u"}, FsReader(tmp_path)).get("NCCL_DEBUG") == "INFO"


def test_this_tools_own_variables_are_not_settings_and_its_secret_is_never_recorded():
    env = {"NCCL_DOCTOR_SECRET": "0123456789abcdef0123456789abcdef", "NCCL_DOCTOR_STAGE_DIR": "/tmp/x",
           "NCCL_IB_HCA": "mlx5_0"}
    values = effective_settings(env, None).values
    assert set(values) == {"NCCL_IB_HCA"}
