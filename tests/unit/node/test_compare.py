"""Cross-node comparison: only what differs, with the nodes on each side."""

from __future__ import annotations

from nccl_doctor.node import compare, node_facts, probe_node
from nccl_doctor.report import Severity
from tests.helpers import sysfs_builder

# What a torch process reads and hands to node_facts (this package never imports torch).
VERSIONS = {"version.torch": "2.5.1", "version.cuda": "12.4", "version.nccl": "2.21.5"}


def _node(host, **over):
    base = {"host": host, "version.torch": "2.13.0", "version.nccl": "2.21.5", "version.cuda": "12.4",
            "driver.nvidia": "550.54", "env.NCCL_SOCKET_IFNAME": "ib0", "nic.ib0": "infiniband, up, 200000 Mb/s",
            "plugin.net": "none"}
    base.update(over)
    return base


def test_identical_nodes_give_nothing():
    assert compare([_node("n1"), _node("n2"), _node("n3")]) == []


def test_single_node_gives_nothing():
    assert compare([_node("n1", **{"version.nccl": "2.18"})]) == []


def test_version_difference_names_both_sides_odd_one_as_where():
    nodes = [_node("n1"), _node("n2", **{"version.nccl": "2.18.1"}), _node("n3")]
    [f] = compare(nodes)
    assert f.code == "ND401" and f.severity is Severity.FAIL
    assert f.message == "version nccl differs across nodes: 2.21.5 on n[1,3]; 2.18.1 on n2"
    assert f.where.host == "n2"


def test_env_unset_on_one_node_and_nic_rate_differ():
    nodes = [_node("a"), _node("b"), _node("c", **{"nic.ib0": "infiniband, up, 100000 Mb/s"})]
    del nodes[1]["env.NCCL_SOCKET_IFNAME"]
    found = {f.code: f for f in compare(nodes)}
    assert set(found) == {"ND402", "ND403"}
    assert found["ND402"].message.endswith("ib0 on a,c; (unset) on b")
    assert found["ND402"].severity is Severity.WARN
    assert found["ND403"].where.host == "c" and found["ND403"].where.iface == "ib0"


def test_plugin_difference_fails():
    [f] = compare([_node("a", **{"plugin.net": "/opt/aws-ofi/libnccl-net.so"}), _node("b")])
    assert f.code == "ND404" and f.severity is Severity.FAIL
    assert "aws-ofi" in f.message and "none on b" in f.message


def test_host_key_and_unknown_keys_are_not_compared():
    assert compare([_node("a", extra="1"), _node("b", extra="2")]) == []


def test_node_facts_reads_this_machine(monkeypatch):
    env = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG_FILE": "/tmp/x.%h", "PATH": "/bin"}
    facts = node_facts(probe_node("/", env), env, versions=VERSIONS, host="me")
    assert facts["host"] == "me"
    assert facts["env.NCCL_SOCKET_IFNAME"] == "eth0"
    assert "env.NCCL_DEBUG_FILE" not in facts  # per-node by design
    assert facts["version.torch"].startswith("2.")
    assert {k: facts[k] for k in VERSIONS} == VERSIONS  # the caller's versions, verbatim
    assert not any(k.startswith("nic.lo") for k in facts)


def test_many_odd_nodes_are_named_in_slurm_hostlist_form():
    nodes = [{"host": f"n{i:03d}", "version.torch": "2.13.0"} for i in range(1, 301)]
    for i in (7, 8, 9, 200):
        nodes[i - 1]["version.torch"] = "2.12.0"
    (f,) = compare(nodes)
    assert f.where.host == "n[007-009,200]"
    assert "2.13.0 on n[001-006,010-199,201-300]" in f.message


def test_node_facts_read_the_driver_and_nics_through_the_probes_root(tmp_path):
    """A fixture root, not this machine: every fact comes from the probe's reader (a snapshot works too)."""
    root = sysfs_builder.build(sysfs_builder.cloud_vm(), tmp_path)
    (root / "sys/module/nvidia").mkdir(parents=True, exist_ok=True)
    (root / "sys/module/nvidia/version").write_text("550.54.15\n")
    facts = node_facts(probe_node(root, {}), {}, versions=VERSIONS, host="vm")
    assert facts["driver.nvidia"] == "550.54.15"
    assert any(k.startswith("nic.") for k in facts) and not any(k.startswith("nic.lo") for k in facts)
    (root / "sys/module/nvidia/version").unlink()
    assert node_facts(probe_node(root, {}), {}, versions=VERSIONS, host="vm")["driver.nvidia"] == "none"


def _pod(tmp_path, name, **eth1):
    """A pod-like node: one veth eth1 with an address and the default route (sysfs_builder's format)."""
    spec = {"hostname": name,
            "net": [{"name": "eth1", "kind": "veth", "speed": 10000, "addrs": ["198.18.0.1/24"], **eth1}],
            "default": ("eth1", "198.18.0.254"), "modules": ["veth"]}
    return probe_node(sysfs_builder.build(spec, tmp_path / name), {})


def test_a_veth_whose_peer_shares_its_ifindex_is_the_same_nic_as_the_others(tmp_path):
    """sysfs tells a veth by iflink != ifindex; where the peer's ifindex, in its own namespace, is the same
    number, only "virtual Ethernet" is known. That node's eth1 must still be compared: it went missing
    from node 0's facts of every namespace run, and every healthy multi-node preflight warned ND403."""
    plain = _pod(tmp_path, "n2")
    same = _pod(tmp_path, "n1", iflink=2)  # lo is 1, eth1 2: its peer is 2 as well
    assert [i.virtual_kind for i in same.facts.interfaces if i.name == "eth1"] == ["virtual-ethernet"]
    nodes = [node_facts(p, {}, versions=VERSIONS, host=h) for p, h in ((same, "n1"), (plain, "n2"), (plain, "n3"))]
    assert nodes[0]["nic.eth1"] == nodes[1]["nic.eth1"] == "virtual, up, 10000 Mb/s"
    assert compare(nodes) == []
