"""probe end to end on fixture trees: findings, NCCL/Gloo choices, exports, JSON, snapshots, CLI."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers import sysfs_builder as b

from nccl_doctor.cli import main
from nccl_doctor.node.probe import check, node_dict, probe_node, probe_report

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return {name: b.build(spec(), tmp_path_factory.mktemp(name)) for name, spec in b.SPECS.items()}


def codes(root, env=None, sev=None):
    fs = check(probe_node(root, {"HOME": "/root", **(env or {})}))
    return {f.code for f in fs if sev is None or f.severity.value == sev}


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


def test_ib_disable_true_keeps_ib(roots):
    node = probe_node(roots["dgx_h100"], {"NCCL_IB_DISABLE": "true"})
    assert node.nccl_ib.ports and node.nccl_ib.disabled_by is None
    msg = next(f.message for f in check(node) if f.code == "ND217")
    assert "IB stays ENABLED" in msg


def test_socket_ifname_only_down(roots):
    node = probe_node(roots["degraded_ib"], {"NCCL_SOCKET_IFNAME": "=ib1"})
    f = next(f for f in check(node) if f.code == "ND203")
    assert f.severity.value == "fail" and f.where.iface == "ib1" and f.fix.startswith("export NCCL_SOCKET_IFNAME=")


def test_degraded_ports_and_exports(roots):
    node = probe_node(roots["degraded_ib"], {})
    fs = check(node)
    assert {(f.code, f.where.device) for f in fs if f.code in ("ND209", "ND210")} == {("ND209", "mlx5_1:1"),
                                                                                      ("ND210", "mlx5_2:1")}
    assert "ND214" in {f.code for f in fs}  # GPUs + IB, no peermem, proprietary driver: no DMA-BUF
    ex = node_dict(node)["exports"]
    assert "export NCCL_IB_HCA==mlx5_0:1,mlx5_3:1" in ex and "export NCCL_SOCKET_IFNAME==ib0" in ex


def test_roce_node(roots):
    node = probe_node(roots["roce"], {})
    fs = check(node)
    got = {f.code for f in fs}
    assert {"ND201", "ND212", "ND213"} <= got and "ND214" not in got  # DMA-BUF possible
    assert node.nccl_socket.bootstrap == "eno1"  # NCCL's default: first non-docker/lo interface
    ex = node_dict(node)["exports"]
    assert ex[:3] == ["export NCCL_SOCKET_IFNAME==bond0", "export NCCL_IB_HCA==mlx5_bond_0:1",
                      "export NCCL_IB_GID_INDEX=3"]
    assert "ND211" in codes(roots["roce"], {"NCCL_IB_GID_INDEX": "2"})  # a RoCE v1 GID
    assert "ND211" in codes(roots["roce"], {"NCCL_IB_GID_INDEX": "9"})
    assert "ND211" not in codes(roots["roce"], {"NCCL_IB_GID_INDEX": "3"})


def test_p5_efa(roots):
    node = probe_node(roots["p5"], {})
    assert node.nccl_ib.ports == [] and node.nccl_socket.ifaces == ["ens32"]
    assert "ND225" in {f.code for f in check(node)}
    assert node_dict(node)["nccl"]["transport"].startswith("plugin")


def test_virtual_bootstrap(roots):
    assert "ND206" in codes(roots["cloud_vm"], {"NCCL_SOCKET_IFNAME": "docker"}, "warn")


def test_cloud_vm_gloo_loopback(roots):
    node = probe_node(roots["cloud_vm"], {})
    got = {f.code: f for f in check(node)}
    assert "ND215" in got and got["ND215"].fix == "export GLOO_SOCKET_IFNAME=ens5"
    assert "ND226" in got and node.nccl_socket.ifaces == ["ens5"]


def test_conf_file_injects_quoted_ifname(tmp_path):
    spec = b.dgx_h100()
    spec["files"] = {"/etc/nccl.conf": 'NCCL_SOCKET_IFNAME="ib"\n'}
    root = b.build(spec, tmp_path)
    node = probe_node(root, {})
    assert node.nccl_socket.ifaces == []
    got = {(f.code, f.severity.value) for f in check(node)}
    assert {("ND202", "fail"), ("ND204", "warn"), ("ND220", "warn")} <= got
    assert probe_node(root, {"NCCL_SOCKET_IFNAME": "ib"}).nccl_socket.ifaces  # environment wins


def test_report_json_keys(roots):
    rep = probe_report(probe_node(roots["dgx_h100"], {}))
    d = rep.data
    assert {"interfaces", "nccl", "gloo_iface", "host", "exports", "rdma_devices", "gpus"} <= set(d)
    i = next(x for x in d["interfaces"] if x["name"] == "ib0")
    assert {"name", "kind", "operstate", "speed_mbps", "addresses", "rdma"} <= set(i)
    assert i["kind"] == "infiniband" and i["speed_mbps"] == 400000 and i["addresses"] == ["10.1.0.11/24"]
    assert d["nccl"]["socket_ifaces"][0] == "ib0" and len(d["nccl"]["ib_devices"]) == 8
    assert d["gloo_iface"] == "bond0"
    json.dumps(d)


def test_cli_json_and_exit_codes(roots, capsys):
    rc = main(["probe", "--root", str(roots["dgx_h100"]), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["verdict"] == "pass" and doc["command"] == "probe"
    assert main(["probe", "--root", str(roots["degraded_ib"]), "--strict"]) == 1
    out = capsys.readouterr().out
    assert "Recommended exports" in out and "export NCCL_IB_HCA==mlx5_0:1,mlx5_3:1" in out
    assert main(["probe", "--root", "/nonexistent-root"]) == 2
    assert "error: --root /nonexistent-root" in capsys.readouterr().err


def test_cli_fail_exit(roots, capsys, monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")
    assert main(["probe", "--root", str(roots["dgx_h100"])]) == 1
    assert "ND202" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(b.SPECS))
def test_snapshot_round_trip(roots, name, tmp_path, capsys, monkeypatch):
    """--snapshot captures exactly what was read; --root on it (tar.gz or extracted) gives the same JSON."""
    for k in [k for k in __import__("os").environ if k.startswith(("NCCL_", "GLOO_"))]:
        monkeypatch.delenv(k)
    snap = tmp_path / "node.tar.gz"
    assert main(["probe", "--root", str(roots[name]), "--format", "json", "--snapshot", str(snap)]) in (0, 1)
    first = json.loads(capsys.readouterr().out)
    main(["probe", "--root", str(snap), "--format", "json"])
    second = json.loads(capsys.readouterr().out)
    for doc in (first, second):
        doc.pop("root")
    assert first == second


def test_snapshot_of_live_system_round_trips(tmp_path, capsys):
    snap = tmp_path / "live.tar.gz"
    main(["probe", "--format", "json", "--snapshot", str(snap)])
    live = json.loads(capsys.readouterr().out)
    extracted = tmp_path / "x"
    subprocess.run(["tar", "xzf", str(snap), "-C", str(extracted.mkdir() or extracted)], check=True, timeout=30)
    main(["probe", "--root", str(extracted), "--format", "json"])
    again = json.loads(capsys.readouterr().out)
    for doc in (live, again):
        doc.pop("root")
    assert live == again
    assert snap.stat().st_size < 200_000


def test_probe_never_imports_torch_and_is_fast(roots):
    code = ("import sys, time; from nccl_doctor.cli import main; t=time.perf_counter(); "
            f"rc=main(['probe','--root',{str(roots['dgx_h100'])!r},'--format','json']); "
            "sys.stderr.write(f'{time.perf_counter()-t:.3f}'); assert 'torch' not in sys.modules")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert float(p.stderr.strip().splitlines()[-1]) < 1.0


def test_probe_node_is_fast(roots):
    t = time.perf_counter()
    probe_report(probe_node(roots["dgx_h100"], {}))
    assert time.perf_counter() - t < 0.5


def test_container_veth_uplink_is_data_not_virtual_bootstrap(tmp_path):
    """A pod's eth0 is a veth with the default route: NCCL bootstrapping on it is right, not ND206.
    A docker bridge in the same container stays virtual, and choosing it is still ND206."""
    spec = {"net": [{"name": "eth0", "kind": "veth", "speed": 10000, "addrs": ["198.18.0.1/24"]},
                    {"name": "docker0", "kind": "bridge", "addrs": ["198.18.200.1/24"]}],
            "default": ("eth0", "198.18.0.254")}
    root = b.build(spec, tmp_path)
    node = probe_node(root, {})
    roles = {i.name: (i.kind, i.role) for i in node.facts.interfaces}
    assert roles["eth0"] == ("virtual", "data") and roles["docker0"][1] == "virtual"
    assert node.nccl_socket.bootstrap == "eth0"
    assert "ND206" not in codes(root)
    assert "ND206" in codes(root, {"NCCL_SOCKET_IFNAME": "=docker0"}, "warn")


def test_no_rdma_warns_only_where_gpus_make_nccl_matter(roots, tmp_path):
    cpu_only = {f.code: f.severity.value for f in check(probe_node(roots["cloud_vm"], {}))}
    assert cpu_only["ND226"] == "pass"
    spec = b.cloud_vm()
    spec["pci"] = {**spec.get("pci", {}), "0000:00:1e.0": {"at": "pci0000:00", "vendor": "0x10de", "device": "0x2330",
                                                          "class": "0x030200", "numa": 0}}
    with_gpu = {f.code: f.severity.value for f in check(probe_node(b.build(spec, tmp_path), {}))}
    assert with_gpu["ND226"] == "warn"


def test_cpu_node_nd226_does_not_contradict_nccl_failures(roots):
    """A CPU node still fails a job-breaking NCCL setting; ND226 must not claim NCCL is irrelevant here."""
    fs = {f.code: f for f in check(probe_node(roots["cloud_vm"], {"NCCL_SOCKET_IFNAME": "^="}))}
    assert fs["ND202"].severity.value == "fail" and fs["ND226"].severity.value == "pass"
    assert "does not run" not in fs["ND226"].message and "still checked" in fs["ND226"].message


def _no_rdma_dgx(tmp_path):
    """dgx_h100 with its IB NICs removed: GPUs and the bond0 management/data bond stay."""
    spec = b.dgx_h100()
    nics = {bdf for bdf, p in spec["pci"].items() if p is not None and p.get("class") == b.CX7_IB["class"]}
    spec["pci"] = {k: v for k, v in spec["pci"].items() if k not in nics}
    spec["net"] = [n for n in spec["net"] if n.get("pci") not in nics]
    spec["rdma"] = []
    return b.build(spec, tmp_path)


@pytest.mark.parametrize("net, sev, fix", [
    ("IB", "fail", "unset NCCL_NET"), ("ib", "fail", "unset NCCL_NET"),
    ("Sockets", "fail", "export NCCL_NET=Socket"), ("TCP", "fail", "export NCCL_NET=Socket"),
    ("RoCE", "fail", "unset NCCL_NET"),  # RoCE is NCCL's IB transport, and there is none here
    ("UCX", "fail", "unset NCCL_NET"), ("IBext_v8", "fail", "unset NCCL_NET"),
    ("MyVendorNet", "warn", "unset NCCL_NET"),
])
def test_nccl_net_checked_without_rdma(tmp_path, net, sev, fix):
    root = _no_rdma_dgx(tmp_path)
    node = probe_node(root, {"NCCL_NET": net})
    assert not node.facts.rdma_devices and node.facts.gpus
    f = next(f for f in check(node) if f.code == "ND222")
    assert (f.severity.value, f.fix) == (sev, fix) and f"NCCL_NET={net}" in f.message
    if sev == "fail":
        rep = probe_report(node)
        assert "ND200" not in {x.code for x in rep.findings}  # no PASS line saying TCP sockets will carry data
        assert "NCCL init fails" in rep.summary and rep.data["nccl"]["transport"].startswith("none")
    for ok in ("Socket", "socket"):
        assert "ND222" not in codes(root, {"NCCL_NET": ok})


def test_nccl_net_plugin_on_ib_node_is_not_rdma_disabled(roots):
    """NCCL_NET=UCX drives the IB ports through a plugin: not ND207 ('IB off, traffic over TCP'), not ND222."""
    got = codes(roots["dgx_h100"], {"NCCL_NET": "UCX"})
    assert "ND207" not in got and "ND222" not in got
    assert {"ND207", "ND222"} & codes(roots["dgx_h100"], {"NCCL_NET": "Sockets"}) == {"ND222"}


@pytest.mark.parametrize("value, bad, fix", [
    ("ens5,lo", "lo", "export GLOO_SOCKET_IFNAME=ens5"),
    ("lo", "lo", "export GLOO_SOCKET_IFNAME=ens5"),
    ("docker0,ens5", "docker0", "export GLOO_SOCKET_IFNAME=ens5"),
])
def test_gloo_list_with_unreachable_device(roots, value, bad, fix):
    fs = [f for f in check(probe_node(roots["cloud_vm"], {"GLOO_SOCKET_IFNAME": value})) if f.code == "ND216"]
    assert [(f.severity.value, f.where.iface, f.fix) for f in fs] == [("warn", bad, fix)]
    assert not [f for f in check(probe_node(roots["cloud_vm"], {"GLOO_SOCKET_IFNAME": "ens5"})) if f.code == "ND216"]


def test_gloo_down_device_fix_drops_it(roots):
    fs = [f for f in check(probe_node(roots["degraded_ib"], {"GLOO_SOCKET_IFNAME": "eth0,ib1"})) if f.code == "ND216"]
    assert [(f.where.iface, f.fix) for f in fs] == [("ib1", "export GLOO_SOCKET_IFNAME=eth0")]
    assert "is down" in fs[0].message


def test_missing_nccl_conf_file_warns(roots):
    fs = [f for f in check(probe_node(roots["dgx_h100"], {"NCCL_CONF_FILE": "/nonexist/nccl.conf"})) if f.code == "ND220"]
    assert [(f.severity.value, f.where.file) for f in fs] == [("warn", "/nonexist/nccl.conf")]
    assert "NCCL ignores it" in fs[0].message
