"""The store protocol: every message survives its trip through the store as JSON, keys as documented."""

from __future__ import annotations

import json

from nccl_doctor.cluster.stages import PrefixedSink, Stage
from nccl_doctor.codes import Code
from nccl_doctor.preflight import protocol as p
from nccl_doctor.report import Finding, Severity, Table, Where


def test_findings_survive_the_trip_through_the_store():
    f = Finding(code="ND302", severity=Severity.FAIL, message="m", fix="x", where=Where(host="n2", iface="eth1"),
                evidence=("a", "b"))
    assert Finding.from_dict(json.loads(json.dumps(f.as_dict()))) == f


def test_keys_are_the_ones_every_version_of_the_launcher_uses():
    """The keys are the wire format between nodes: renaming one breaks a mixed run and the tests' stores."""
    assert (p.RUN_KEY, p.CLOSED_KEY, p.GO_KEY, p.RESULT_KEY, p.ERRORS_KEY) == (
        "nccl-doctor/run", "rendezvous/closed", "go", "result", "errors")
    assert (p.LOGS_WANTED_KEY, p.VERDICT_KEY, p.ACKS_KEY, p.PG_PREFIX) == ("logs/wanted", "verdict", "acks", "pg")
    assert [p.node_key(3), p.heartbeat_key(3), p.logs_key(3), p.stages_key(7), p.error_key(7)] == [
        "node/3", "hb/3", "logs/3", "stages/7", "error/7"]


def test_messages_keep_their_json_shape_and_round_trip():
    stamp = p.RunStamp(run="12.0", step="0", host="n1")
    assert json.loads(stamp.to_json()) == {"run": "12.0", "step": "0", "host": "n1"}
    assert p.RunStamp.from_json(stamp.to_json()) == stamp
    closed = p.Closed(missing=[2, 5], host="n1")
    assert p.Closed.from_json(closed.to_json()) == closed and json.loads(closed.to_json())["missing"] == [2, 5]
    err = p.RankError(stage="bench all_gather world 1 MiB", error="RuntimeError: x\nmore")
    assert list(json.loads(err.to_json())) == ["stage", "error"] and p.RankError.from_json(err.to_json()) == err
    assert err.first_line() == "RuntimeError: x"
    verdict = p.VerdictMessage(code=1, verdict=Severity.FAIL, summary="stopped")
    assert p.VerdictMessage.from_json(verdict.to_json()) == verdict
    assert verdict.to_json() == '{"code": 1, "verdict": "fail", "summary": "stopped"}'  # the wire bytes
    assert type(p.VerdictMessage.from_json(verdict.to_json()).verdict) is Severity
    cuda = p.RankError(stage="init", error="CudaUnusable: x", fix="f", code=Code.CUDA_UNUSABLE)
    assert cuda.to_json() == '{"stage": "init", "error": "CudaUnusable: x", "fix": "f", "code": "ND313"}'
    assert p.RankError.from_json(cuda.to_json()).code is Code.CUDA_UNUSABLE and err.code is None
    mark = p.StageMark(4, "bench all_gather world 1 MiB")
    assert mark.encode() == "4|bench all_gather world 1 MiB" and p.StageMark.decode(mark.encode()) == mark


def test_node_post_and_rank_result_round_trip():
    f = Finding(code="ND216", severity=Severity.WARN, message="m", where=Where(host="n2", iface="lo"))
    post = p.NodePost(host="n2", node=1, facts={"version.torch": "2"}, findings=[f], fatal=False)
    assert list(json.loads(post.to_json())) == ["host", "node", "facts", "findings", "fatal"]
    assert p.NodePost.from_json(post.to_json()) == post and post.bad_findings() == [f]
    t = Table(title="t", columns=("a",), rows=(("1",),))
    result = p.RankResult(findings=[f], tables=[t], notes=["n"], data={"backend": "gloo"}, timings_s={"bench": 1.0},
                          measured=False)
    assert list(json.loads(result.to_json())) == ["findings", "tables", "notes", "data", "timings_s", "measured"]
    assert p.RankResult.from_json(result.to_json()) == result


def test_log_summaries_keep_each_variants_keys_in_the_report():
    assert list(p.LogSummary(host="n1", skipped="why").as_dict()) == ["host", "skipped", "findings"]
    assert list(p.LogSummary(host="n1", skipped="why", files=2).as_dict()) == ["host", "skipped", "files", "findings"]
    full = p.LogSummary(host="n1", files=1, inter_node={"transport": "IB"}, intra_node=["P2P"], communicators=[])
    assert list(full.as_dict()) == ["host", "skipped", "files", "inter_node", "intra_node", "communicators",
                                    "findings"]
    assert p.LogSummary.from_json(full.to_json()).as_dict() == full.as_dict()
    assert p.LogSummary.not_sent("n3").as_dict() == {"host": "n3", "findings": [],
                                                      "skipped": "the node sent no NCCL log summary"}


def test_stages_are_their_strings():
    assert Stage.NCCL_LOGS == "nccl-logs" and f"{Stage.NOT_STARTED}" == "not started"
    assert json.dumps({"stage": Stage.RENDEZVOUS}) == '{"stage": "rendezvous"}'


def test_a_ranks_marks_number_its_stages_and_bench_stages_carry_their_prefix(tmp_path):
    prefix = tmp_path / p.STAGE_RECORD
    marks = p.StageMarks(3, str(prefix))
    assert marks.current == "init" and p.recorded_stage(prefix, 3) == p.NOT_STARTED_MARK
    marks.record(Stage.INIT)
    PrefixedSink(marks, p.BENCH_PREFIX).record("all_gather world 1 MiB")
    assert p.recorded_stage(prefix, 3) == p.StageMark(2, "bench all_gather world 1 MiB")
    assert marks.current == "bench all_gather world 1 MiB"
    assert (tmp_path / f"{p.STAGE_RECORD}.3").read_text() == "2|bench all_gather world 1 MiB"  # the relayed bytes


def test_marks_outside_a_launcher_record_nothing_but_still_know_the_stage(tmp_path):
    marks = p.StageMarks(0, None)
    marks.record(Stage.FSDP_SMOKE)
    assert marks.current == "fsdp-smoke" and marks.seq == 1 and not list(tmp_path.iterdir())
