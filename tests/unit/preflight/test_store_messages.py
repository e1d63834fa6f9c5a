"""Every message read from the store is checked field by field: a wrong type, a malformed mark or a value
that is not JSON is one ``ValueError`` naming the field, never a KeyError/TypeError later."""

from __future__ import annotations

import json

import pytest

from nccl_doctor.preflight import protocol as p

FINDING = {"code": "ND300", "severity": "pass", "message": "m"}


@pytest.mark.parametrize(("cls", "value", "why"), [
    (p.RankResult, "garbage{", "not valid JSON"),
    (p.RankResult, "[" * 100_000, "not valid JSON"),
    (p.RankResult, "[1, 2]", "expected a JSON object, got list"),
    (p.RankResult, {"findings": "x", "tables": [], "data": {}}, "'findings' must be a list"),
    (p.RankResult, {"findings": [{"code": "ND300", "severity": "great", "message": "m"}], "tables": [], "data": {}},
     "unknown severity"),
    (p.RankResult, {"findings": [dict(FINDING, where={"rank": "0"})], "tables": [], "data": {}},
     "'rank' must be an integer"),
    (p.RankResult, {"findings": [], "tables": [{"title": "t", "columns": ["a"], "rows": [[1]]}], "data": {}},
     "rows must be lists of strings"),
    (p.RankResult, {"findings": [], "tables": [], "data": {"bench": []}}, "'bench' must be an object"),
    (p.RankResult, {"findings": [], "tables": [], "data": {}, "timings_s": {"bench": "1"}}, "map names to numbers"),
    (p.NodePost, {"host": "n", "node": "1", "facts": {}, "findings": [], "fatal": False}, "'node' must be an integer"),
    (p.NodePost, {"host": "n", "node": 1, "facts": {"a": 1}, "findings": [], "fatal": False}, "map names to strings"),
    (p.NodePost, {"host": "n", "node": 1, "facts": {}, "findings": [], "fatal": "no"}, "'fatal' must be true or false"),
    (p.VerdictMessage, {"code": True, "verdict": "pass", "summary": ""}, "'code' must be an integer"),
    (p.RankError, {"stage": 3}, "'stage' must be a string"),
    (p.RankError, {"stage": "init", "error": "x", "code": "ND999"}, "'code' must be a Code value, not 'ND999'"),
    (p.VerdictMessage, {"code": 0, "verdict": "great", "summary": ""}, "'verdict' must be a Severity value"),
    (p.Closed, {"missing": ["1"]}, "'missing' must be a list of integers"),
    (p.RunStamp, {"step": "0"}, "'run' must be a string"),
    (p.LogSummary, {"host": "n", "communicators": [1]}, "list of objects"),
    (p.LogSummary, {"host": "n", "communicators": [{"inter_node": {"transport": ["IB"]}}]}, "'transport' must be"),
    (p.LogSummary, {"host": "n", "findings": [{"code": "ND100"}]}, "'severity' must be a string"),
])
def test_a_malformed_message_names_what_is_wrong(cls, value, why):
    with pytest.raises(ValueError, match=why):
        cls.from_json(value if isinstance(value, str) else json.dumps(value))


@pytest.mark.parametrize("text", ["", "x|init", "1", "99999999999999999|init", "1.5|init"])
def test_a_malformed_stage_mark_is_a_value_error(text):
    with pytest.raises(ValueError, match="a stage mark is"):
        p.StageMark.decode(text)


def test_heartbeats_and_caps():
    assert p.heartbeat_count("12") == 12 and p.StageMark.decode(p.NOT_STARTED_MARK.encode()) == p.NOT_STARTED_MARK
    for bad in ("-1", "x", "9" * 13):
        with pytest.raises(ValueError, match="a heartbeat is a count"):
            p.heartbeat_count(bad)
    assert p.value_cap(p.node_key(3)) == 2 << 20 and p.value_cap(p.RESULT_KEY) == 32 << 20
    assert p.value_cap(p.stages_key(1)) == p.value_cap(p.VERDICT_KEY) == p.value_cap(p.LOGS_WANTED_KEY) == 64 << 10
    assert p.key_owner("node/3") == (3, None) and p.key_owner("error/9") == (None, 9)
    assert p.key_owner("stages/4") == (4, None)
    assert p.key_owner(p.RESULT_KEY) == (None, 0) and p.key_owner(p.VERDICT_KEY) == (0, None)


def test_a_nodes_stages_round_trip_and_a_rank_records_its_own(tmp_path):
    stages = p.NodeStages((p.StageMark(3, "bench all_gather world 1 MiB"), p.NOT_STARTED_MARK))
    assert p.NodeStages.from_json(stages.to_json()) == stages
    prefix = tmp_path / p.STAGE_RECORD
    assert p.recorded_stage(prefix, 5) == p.NOT_STARTED_MARK
    p.record_stage(str(prefix), 5, p.StageMark(2, "init"))
    assert p.recorded_stage(prefix, 5) == p.StageMark(2, "init")
    (tmp_path / f"{p.STAGE_RECORD}.6").write_text("half")
    assert p.recorded_stage(prefix, 6) == p.NOT_STARTED_MARK
