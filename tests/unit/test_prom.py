"""``--prom-out``: the node_exporter textfile format, read back with prometheus_client's own parser; the
values a parse fixture and a probe tree must give; written atomically, never through a planted link, and
a bad path refused in one line before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nccl_doctor.cli import main
from nccl_doctor.codes import Code
from nccl_doctor.prom import prom_text
from nccl_doctor.report import Report, Severity, finding
from nccl_doctor.text import printable
from tests.helpers import sysfs_builder as b
from tests.helpers.payloads import Doc

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "fixtures" / "logs" / "ib-disabled-socket-fallback.log"


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample by metric name, as prometheus_client's parser reads the file."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def one(got: dict, name: str, **labels: str) -> float:
    """The value of the one sample of ``name`` whose labels include ``labels``."""
    found = [v for lab, v in got.get(name, []) if all(lab.get(k) == w for k, w in labels.items())]
    assert len(found) == 1, (name, labels, got.get(name))
    return found[0]


def test_parse_fixture_verdict_and_findings_match_its_json(tmp_path, capsys):
    prom, js = tmp_path / "parse.prom", tmp_path / "parse.json"
    assert main(["parse", str(LOG), "--prom-out", str(prom), "--json-out", str(js)]) == 0
    doc, got = json.loads(js.read_text()), samples(prom.read_text())
    assert doc["verdict"] == "warn"
    [(labels, value)] = got["nccl_doctor_verdict"]
    assert value == 1 and labels["command"] == "parse"
    # ND103 is about the log's node n1: the finding's host, not the machine that parsed the log
    assert one(got, "nccl_doctor_findings", code="ND103", severity="warn", host="n1") == 1
    assert len(got["nccl_doctor_findings"]) == len(doc["findings"]) == 1
    assert one(got, "nccl_doctor_could_not_run", command="parse") == 0
    assert one(got, "nccl_doctor_last_run_timestamp_seconds", command="parse") > 1.7e9


def test_probe_tree_interface_and_rdma_port_states(tmp_path, capsys):
    root = b.build(b.degraded_ib(), tmp_path / "root")
    prom = tmp_path / "probe.prom"
    assert main(["probe", "--root", str(root), "--prom-out", str(prom)]) == 1  # a compute port down FAILs
    got = samples(prom.read_text())
    base = {"command": "probe", "host": "gpu05"}  # the tree's own host name, not this machine's
    assert one(got, "nccl_doctor_verdict", **base) == 2
    assert one(got, "nccl_doctor_findings", **base, code="ND209", severity="fail") == 1
    # mlx5_1 is DOWN/Disabled, the others ACTIVE; mlx5_2 trained at 2X: 100 Gb/s is 12.5 GB/s
    assert one(got, "nccl_doctor_rdma_port_active", **base, device="mlx5_1", port="1") == 0
    assert one(got, "nccl_doctor_rdma_port_active", **base, device="mlx5_0", port="1") == 1
    assert one(got, "nccl_doctor_rdma_port_info", **base, device="mlx5_1", state="DOWN",
               phys_state="Disabled", link_layer="InfiniBand") == 1
    assert one(got, "nccl_doctor_rdma_port_rate_bytes_per_second", **base, device="mlx5_2") == 12.5e9
    assert one(got, "nccl_doctor_interface_up", **base, iface="ib1") == 0
    assert one(got, "nccl_doctor_interface_up", **base, iface="ib0") == 1
    assert one(got, "nccl_doctor_interface_info", **base, iface="ib1", operstate="down", kind="infiniband") == 1
    assert one(got, "nccl_doctor_interface_speed_bytes_per_second", **base, iface="eth0") == 10_000 * 1e6 / 8


def test_label_values_from_input_are_escaped_and_parse_back():
    """A host or code from a log or a peer (quotes, backslashes, newlines) cannot forge a series."""
    host = 'n1"} nccl_doctor_verdict{command="x\\'
    report = Report(command="parse", findings=[finding(Code.SOCKET_TRANSPORT, Severity.FAIL, "m", host=host + "\n")])
    text = prom_text(report, host="me")
    got = samples(text)
    assert [lab["host"] for lab, _ in got["nccl_doctor_findings"]] == [printable(host + "\n")]
    assert [lab for lab, _ in got["nccl_doctor_verdict"]] == [{"command": "parse", "host": "me"}]
    assert sum(line.startswith("nccl_doctor_verdict{") for line in text.splitlines()) == 1  # nothing injected


def test_bench_shaped_data_gives_busbw_in_bytes_per_second():
    """preflight keeps bench's data under "bench": both shapes give the same series."""
    results = [{"op": "all_gather", "group": "world", "size_bytes": 1 << 20, "busbw_gbps": 0.5}]
    nodes = [{"host": "n2", "inter_node_busbw_gbps": 0.025}]
    bench = {"results": results, "nodes": nodes}
    for payload in (Doc(bench, bench_figures=bench), Doc({"bench": bench}, bench_figures=bench)):
        got = samples(prom_text(Report(command="preflight", payload=payload), host="n1"))
        assert one(got, "nccl_doctor_bench_busbw_bytes_per_second", host="n1", group="world", op="all_gather",
                   size_bytes=str(1 << 20)) == 0.5e9
        assert one(got, "nccl_doctor_bench_node_busbw_bytes_per_second", node="n2") == 0.025e9


def test_written_atomically_leaving_no_temp_file(tmp_path, capsys):
    prom = tmp_path / "nccl.prom"
    prom.write_text("old\n")
    assert main(["parse", str(LOG), "--prom-out", str(prom)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nccl.prom"]  # no .nccl.prom.*.tmp left behind
    assert prom.read_text().startswith("# HELP nccl_doctor_verdict")


def test_a_planted_symlink_is_replaced_never_written_through(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    prom = tmp_path / "nccl.prom"
    prom.symlink_to(victim)
    assert main(["parse", str(LOG), "--prom-out", str(prom)]) == 0
    assert victim.read_text() == "precious\n"
    assert not prom.is_symlink() and "nccl_doctor_verdict" in prom.read_text()


@pytest.mark.parametrize("bad", ["missing-dir/x.prom", "."])
def test_bad_path_is_one_line_exit_2_before_any_work(tmp_path, capsys, bad):
    rc = main(["parse", str(LOG), "--prom-out", str(tmp_path / bad)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""  # refused before the log was read: no report on stdout
    assert err.count("\n") == 1 and err.startswith("nccl-doctor parse: error: cannot write"), err


def test_same_file_as_json_out_is_refused(tmp_path, capsys):
    out = tmp_path / "same"
    assert main(["parse", str(LOG), "--prom-out", str(out), "--json-out", str(out)]) == 2
    assert "name the same file" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_a_finding_naming_a_hostlist_counts_for_each_of_its_nodes():
    """preflight merges a problem several nodes share into one finding naming them as a hostlist: a dashboard
    keyed on the host still gets one series per node. A forged list too long to expand stays one label."""
    report = Report(command="preflight", findings=[
        finding(Code.RDMA_PORT_NOT_ACTIVE, Severity.WARN, "m", host="gpu[01-03]"),
        finding(Code.NODE_LOST, Severity.FAIL, "m", host="gpu02,gpu07"),
        finding(Code.SOCKET_TRANSPORT, Severity.WARN, "m", host="x[1-99999]"),
    ])
    got = samples(prom_text(report, host="gpu01"))
    warn = {lab["host"] for lab, v in got["nccl_doctor_findings"] if lab["code"] == Code.RDMA_PORT_NOT_ACTIVE}
    assert warn == {"gpu01", "gpu02", "gpu03"}
    assert {lab["host"] for lab, _ in got["nccl_doctor_findings"] if lab["code"] == Code.NODE_LOST} == {"gpu02", "gpu07"}
    assert one(got, "nccl_doctor_findings", code=Code.SOCKET_TRANSPORT, host="x[1-99999]") == 1
