"""preflight's payload: typed keys, written in the order node 0 learnt them (which differs by how far the
run got), a key set again keeps its place, and no key the report does not have."""

import pytest

from nccl_doctor.payload import BenchFigures
from nccl_doctor.preflight.payload import PreflightPayload, preflight_payload
from nccl_doctor.render import report_dict
from nccl_doctor.report import Report


def test_keys_are_written_in_the_order_first_set():
    p = PreflightPayload()
    p.set_plan(2, 8, ["n1", "?"])
    p.node_facts = []
    p.set_result({"backend": "gloo", "bench": {"results": []}, "localisation": {"skipped": "x"}, "fsdp_smoke": None})
    p.set_plan(2, 8, ["n1", "n2"])  # the nodes named themselves: the keys keep their place
    p.timings_s = {"probe": 1.0}
    p.stage = "done"
    assert list(p.to_json()) == ["nnodes", "nproc_per_node", "hosts", "node_facts", "backend", "bench",
                                 "localisation", "fsdp_smoke", "timings_s", "stage"]
    assert p.to_json()["hosts"] == ["n1", "n2"] and p.to_json()["fsdp_smoke"] is None
    assert isinstance(p, BenchFigures) and p.bench_figures == {"results": []}


def test_a_key_the_report_does_not_have_is_refused_and_an_unset_one_is_absent():
    p = PreflightPayload()
    with pytest.raises(AttributeError, match="no key 'verdict'"):
        p.verdict = "pass"  # type: ignore[attr-defined]
    assert not p.has("stage") and p.to_json() == {} and p.bench_figures is None


def test_the_report_makes_its_payload_on_first_use():
    report = Report(command="preflight")
    preflight_payload(report).stage = "rendezvous"
    assert preflight_payload(report) is report.payload
    assert report_dict(report)["stage"] == "rendezvous"
