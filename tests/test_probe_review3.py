"""probe review 3: fixes that work where the setting comes from (nccl.conf), did-you-mean fixes the
tool itself accepts, nccl.conf read byte for byte as NCCL reads it, and silent socket fallbacks as FAILs."""

import os
import shlex
from pathlib import Path

import pytest
from tests.helpers import sysfs_builder as b

from nccl_doctor.node.ncclenv import effective_settings, parse_conf, user_conf_path
from nccl_doctor.node.probe import check, node_dict, probe_node, probe_report
from nccl_doctor.node.sysfs import FsReader

ENV = {"HOME": "/nonexistent"}


pytestmark = pytest.mark.usefixtures("no_nccl_env")


@pytest.fixture(scope="module")
def p5(tmp_path_factory):
    return b.build(b.p5_node(), tmp_path_factory.mktemp("p5"))


def dgx_conf(tmp_path, text: str) -> Path:
    spec = b.dgx_h100()
    spec["files"] = {"/etc/nccl.conf": text}
    return b.build(spec, tmp_path)


def finding(node, code, sev=None):
    got = [f for f in check(node) if f.code == code and (sev is None or f.severity.value == sev)]
    assert got, f"no {code} {sev or ''} in {[(f.code, f.severity.value) for f in check(node)]}"
    return got[0]


def apply_exports(env: dict, lines: list[str]) -> dict:
    """What a shell would hold after running the exports block (comments ignored)."""
    env = dict(env)
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[:1] == ["unset"]:
            env.pop(words[1], None)
        elif words[:1] == ["export"]:
            name, _, value = words[1].partition("=")
            env[name] = value
    return env


# -- 2. settings from nccl.conf: the fix names the file and works (the environment wins) --------------


def test_ib_off_in_conf_fix_overrides_the_file_and_names_every_setting(tmp_path):
    root = dgx_conf(tmp_path, "NCCL_IB_DISABLE=1\nNCCL_NET=Socket\n")
    node = probe_node(root, ENV)
    f = finding(node, "ND207", "fail")
    assert "/etc/nccl.conf" in f.message and "NCCL_IB_DISABLE" in f.message and "NCCL_NET" in f.message
    assert "unset" not in f.fix
    assert "export NCCL_IB_DISABLE=0" in f.fix and "export NCCL_NET=IB" in f.fix and "/etc/nccl.conf" in f.fix
    ex = node_dict(node)["exports"]
    assert not any(line.startswith("unset NCCL_IB_DISABLE") or line.startswith("unset NCCL_NET") for line in ex)
    fixed = probe_node(root, apply_exports(ENV, ex))  # NCCL reads the file again: the exports must still win
    assert fixed.nccl_ib.ports and fixed.nccl_ib.disabled_by is None
    assert "ND207" not in {x.code for x in check(fixed)}


def test_ib_off_in_environment_still_unsets(dgx):
    node = probe_node(dgx, {**ENV, "NCCL_IB_DISABLE": "1"})
    assert finding(node, "ND207", "fail").fix == "unset NCCL_IB_DISABLE"
    assert "unset NCCL_IB_DISABLE" in node_dict(node)["exports"]


def test_ib_off_by_env_and_conf_names_both(tmp_path):
    root = dgx_conf(tmp_path, "NCCL_NET=Socket\n")
    node = probe_node(root, {**ENV, "NCCL_IB_DISABLE": "1"})
    f = finding(node, "ND207", "fail")
    assert "unset NCCL_IB_DISABLE" in f.fix and "export NCCL_NET=IB" in f.fix
    fixed = probe_node(root, apply_exports({**ENV, "NCCL_IB_DISABLE": "1"}, node_dict(node)["exports"]))
    assert fixed.nccl_ib.ports


# -- 3. did-you-mean fixes --------------------------------------------------------------------------


def test_typo_next_to_correct_variable_only_removes_the_typo(dgx):
    node = probe_node(dgx, {**ENV, "NCCL_SOCKET_IFNAME": "ib0", "NCCL_SOCKET_IFNAMe": "x"})
    f = finding(node, "ND219")
    assert f.fix == "unset NCCL_SOCKET_IFNAMe" and "already set" in f.message


@pytest.mark.parametrize("name, value, bad", [
    ("NCCL_SOCKET_IFNAMES", "eth0", "ND202"),  # no eth0 here
    ("NCCL_IB_DISABLED", "1", "ND207"),  # would turn IB off with 8 active ports
])
def test_typo_fix_never_recommends_a_rejected_value(dgx, name, value, bad):
    node = probe_node(dgx, {**ENV, name: value})
    f = finding(node, "ND219")
    guess = name[:-1]
    assert f"{guess}={value}" not in f.fix and f.fix.startswith(f"unset {name}")
    assert bad in f.message


def test_typo_with_good_value_still_renames(dgx):
    f = finding(probe_node(dgx, {**ENV, "NCCL_SOCKET_IFNAM": "ib"}), "ND219")
    assert f.fix == "export NCCL_SOCKET_IFNAME=ib; unset NCCL_SOCKET_IFNAM"


def test_spaces_around_equals_in_conf(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME = ib0\n"), ENV)
    f = finding(node, "ND219")
    assert "spaces around '='" in f.message and "/etc/nccl.conf line 2" in f.message
    assert "did you mean NCCL_SOCKET_IFNAME?" not in f.message and "unset" not in f.fix
    assert "NCCL_SOCKET_IFNAME=ib0" in f.fix and "line 2" in f.fix and f.where.file == "/etc/nccl.conf"


def test_typo_in_conf_names_file_and_line(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "# site\nNCCL_SOCKET_IFNAM=ib\n"), ENV)
    f = finding(node, "ND219")
    assert "/etc/nccl.conf line 2" in f.message and not f.fix.startswith("unset")
    assert "NCCL_SOCKET_IFNAME=ib" in f.fix and f.where.file == "/etc/nccl.conf"


def test_not_integer_fix_agrees_with_ib_disabled(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "NCCL_IB_DISABLE=1 # turn off\n"), ENV)
    nd207, nd217 = finding(node, "ND207", "fail"), finding(node, "ND217")
    assert "NCCL_IB_DISABLE=0" in nd207.fix
    assert "export NCCL_IB_DISABLE=1" not in nd217.fix and "to NCCL_IB_DISABLE=1" not in nd217.fix
    assert "export NCCL_IB_DISABLE=0" in nd217.fix and "line 1 of /etc/nccl.conf" in nd217.fix
    assert "column" in nd217.message  # '#' is a comment only at the start of a line


# -- 4. a valid net plugin is not 'IB disabled' --------------------------------------------------------


@pytest.mark.parametrize("tree, net", [("p5", "Libfabric"), ("dgx", "IBext"), ("dgx", "UCX")])
def test_plugin_net_is_not_unset(request, tree, net):
    node = probe_node(request.getfixturevalue(tree), {**ENV, "NCCL_NET": net})
    assert node.nccl_ib.disabled_by is None
    assert not any("NCCL_NET" in line for line in node_dict(node)["exports"])
    assert not [f for f in check(node) if f.severity.value != "pass"]
    assert net in finding(node, "ND200").message


# -- 5. CRLF nccl.conf: values keep the '\r' as in NCCL ------------------------------------------------


def test_reader_keeps_carriage_returns(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_bytes(b"NCCL_SOCKET_IFNAME=bond0\r\nNCCL_IB_HCA=mlx5\r\n")
    assert FsReader(tmp_path).read("/etc/nccl.conf") == "NCCL_SOCKET_IFNAME=bond0\r\nNCCL_IB_HCA=mlx5\r"
    assert parse_conf("A=b\r\n # c=d\n#e=f\nG = h \n") == [("A", "b\r"), ("G ", " h ")]


def test_crlf_conf_is_judged_as_nccl_reads_it(tmp_path):
    node = probe_node(dgx_conf(tmp_path, "NCCL_SOCKET_IFNAME=bond0\r\nNCCL_IB_HCA=mlx5\r\n"), ENV)
    assert node.settings.get("NCCL_SOCKET_IFNAME") == "bond0\r" and node.nccl_socket.ifaces == []
    assert node.nccl_ib.ports == []
    crlf = [f for f in check(node) if "carriage return" in f.message]
    assert crlf and crlf[0].where.file == "/etc/nccl.conf"
    assert "sed -i 's/\\r$//' /etc/nccl.conf" in crlf[0].fix and "dos2unix" in crlf[0].fix
    assert "'bond0\\r'" in finding(node, "ND202", "fail").message
    assert "'mlx5\\r'" in finding(node, "ND208", "fail").message
    assert probe_report(node).verdict.value == "fail"


def test_user_conf_comes_from_passwd_on_the_live_root(tmp_path):
    import pwd
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert user_conf_path({"HOME": "/elsewhere"}, FsReader("/")) == home.rstrip("/") + "/.nccl.conf"
    assert user_conf_path({"HOME": "/home/u"}, FsReader(tmp_path)) == "/home/u/.nccl.conf"  # a snapshot
    (tmp_path / "home/u").mkdir(parents=True)
    (tmp_path / "home/u/.nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    assert effective_settings({"HOME": "/home/u"}, FsReader(tmp_path)).get("NCCL_DEBUG") == "INFO"


# -- 6. loopback bootstrap is a FAIL -----------------------------------------------------------------


def mgmt_only() -> dict:
    return {"hostname": "cpu1", "etc_hosts": "127.0.0.1 localhost\n10.9.0.5 cpu1\n",
            "pci": {"0000:02:00.0": {"vendor": "0x8086", "device": "0x1533", "class": "0x020000", "driver": "igb",
                                     "at": "pci0000:00/0000:00:01.0", "numa": 0},
                    "0000:42:00.0": {**b.H100, "at": "pci0000:40/0000:40:01.1", "numa": 0}},
            "net": [{"name": "eno1", "pci": "0000:02:00.0", "speed": 1000, "addrs": ["10.9.0.5/24"]}],
            "default": ("eno1", "10.9.0.1"), "modules": ["nvidia"], "nvidia_version": b.NVIDIA_PROP_535}


def test_loopback_bootstrap_fails(tmp_path):
    node = probe_node(b.build(mgmt_only(), tmp_path), {**ENV, "NCCL_SOCKET_IFNAME": "^eno1"})
    assert node.nccl_socket.bootstrap == "lo"
    f = finding(node, "ND206", "fail")
    assert f.where.iface == "lo" and "single-node" in f.message and f.fix == "export NCCL_SOCKET_IFNAME==eno1"
    assert probe_report(node).verdict.value == "fail"


# -- 7. every IB port down on a GPU node: one FAIL (silent socket fallback) -----------------------------


def dgx_all_down() -> dict:
    spec = b.dgx_h100()
    for r in spec["rdma"]:
        r["ports"] = {1: {"state": "1: DOWN", "phys": "3: Disabled", "rate": "10 Gb/sec (4X SDR)", "ll": "InfiniBand"}}
    for n in spec["net"]:
        if n["name"].startswith("ib"):
            n["state"] = "down"
    return spec


def test_all_ports_down_is_one_fail(tmp_path):
    node = probe_node(b.build(dgx_all_down(), tmp_path), ENV)
    fails = [f for f in check(node) if f.severity.value == "fail"]
    assert [f.code for f in fails] == ["ND209"]
    f = fails[0]
    assert "mlx5_0:1" in f.message and "mlx5_7:1" in f.message and "TCP sockets" in f.message
    assert "ibstat" in f.fix and "sminfo" in f.fix
    # the per-port WARNs stay, but do not suggest excluding ports when none is left
    assert all("NCCL_IB_HCA" not in x.fix for x in check(node) if x.code == "ND209")
    # bond0 stays management; ND201 is silent because no running data interface is left to switch to
    assert node.facts.iface("bond0").role == "management" and "ND201" not in {x.code for x in check(node)}


def test_one_port_down_stays_a_warn(tmp_path):
    spec = b.dgx_h100()
    spec["rdma"][0]["ports"] = {1: {"state": "1: DOWN", "phys": "2: Polling", "rate": "10 Gb/sec", "ll": "InfiniBand"}}
    node = probe_node(b.build(spec, tmp_path), ENV)
    assert {(f.code, f.severity.value) for f in check(node) if f.severity.value != "pass"} == {("ND209", "warn")}


# -- 12. EFA: ND200, summary and JSON transport agree ---------------------------------------------------


def test_efa_transport_agrees(p5):
    rep = probe_report(probe_node(p5, ENV))
    nd200 = next(f for f in rep.findings if f.code == "ND200")
    assert "aws-ofi-nccl" in nd200.message and "aws-ofi-nccl" in rep.summary
    assert "aws-ofi-nccl" in rep.data["nccl"]["transport"]


# -- 13. GLOO_* typos; values with whitespace shown quoted ---------------------------------------------


def test_gloo_typo_flagged(dgx):
    f = finding(probe_node(dgx, {**ENV, "GLOO_SOCKET_IFNAMES": "bond0"}), "ND219")
    assert "GLOO_SOCKET_IFNAME" in f.message and f.fix == "export GLOO_SOCKET_IFNAME=bond0; unset GLOO_SOCKET_IFNAMES"


def test_whitespace_in_values_is_shown(dgx):
    assert "NCCL_SOCKET_IFNAME='ib0 '" in finding(probe_node(dgx, {**ENV, "NCCL_SOCKET_IFNAME": "ib0 "}), "ND202").message
    assert "NCCL_IB_HCA='mlx5 '" in finding(probe_node(dgx, {**ENV, "NCCL_IB_HCA": "mlx5 "}), "ND208").message


def test_env_value_over_same_conf_value_is_not_just_unset(tmp_path):
    """Unsetting the environment's NCCL_IB_DISABLE=1 would let the file's NCCL_IB_DISABLE=1 back in."""
    root = dgx_conf(tmp_path, "NCCL_IB_DISABLE=1\n")
    node = probe_node(root, {**ENV, "NCCL_IB_DISABLE": "1"})
    f = finding(node, "ND207", "fail")
    assert f.fix.startswith("export NCCL_IB_DISABLE=0") and "unset NCCL_IB_DISABLE and delete line 1" in f.fix
    ex = node_dict(node)["exports"]
    assert probe_node(root, apply_exports({**ENV, "NCCL_IB_DISABLE": "1"}, ex)).nccl_ib.ports
