"""Every field of ``model.py``'s dataclasses and of the parser's state has a merge rule in ``merge.py``:
a field added without one fails here (and the merge reads such ranges in sequence instead of merging them)."""

from __future__ import annotations

import dataclasses
import inspect

from nccl_doctor.logs.parse import merge, model
from nccl_doctor.logs.parse.state import ParserState

RULES = {model.ParseResult: merge.RESULT_RULES, model.Comm: merge.COMM_RULES, model.Group: merge.GROUP_RULES}


def test_every_dataclass_field_has_a_merge_rule():
    classes = [c for _, c in inspect.getmembers(model, inspect.isclass)
               if dataclasses.is_dataclass(c) and c.__module__ == model.__name__]
    assert classes
    for cls in classes:
        if cls in merge.MOVED:
            continue
        assert cls in RULES, f"{cls.__name__}: add its merge rules to nccl_doctor/logs/parse/merge.py"
        names = {f.name for f in dataclasses.fields(cls)}
        missing = names - set(RULES[cls])
        assert not missing, f"{cls.__name__}.{sorted(missing)}: add a rule to nccl_doctor/logs/parse/merge.py"
        assert not set(RULES[cls]) - names, f"{cls.__name__}: rules for fields it no longer has"


def test_every_parser_attribute_has_a_merge_rule():
    attrs = {f.name for f in dataclasses.fields(ParserState)}
    assert attrs == set(merge.PARSER_RULES), (
        f"parser state fields {sorted(attrs ^ set(merge.PARSER_RULES))}: add them to merge.PARSER_RULES")
    assert not hasattr(ParserState(), "__dict__")  # slotted: an attribute set outside the fields fails at once
    assert merge.check(ParserState(), ParserState(track=True))
    assert not merge.check(ParserState(), ParserState())  # only a worker's state records what its range read


def test_group_details_have_rules():
    # every detail key the parser writes: a key without a rule makes the merge read the range in sequence
    g = model.Group(model.Category.WATCHDOG, "k", detail={"pg": "0", "timeout_ms": "1", "ran_for_ms": "5"})
    h = model.Group(model.Category.WATCHDOG, "k", detail={"pg": "1", "ran_for_ms": "7", "status": "12"})
    assert merge.check_fields(merge.GROUP_RULES, g, h)
    merge.merge_fields(merge.GROUP_RULES, g, h)
    assert g.detail == {"pg": model.MIXED_PG, "timeout_ms": "1", "ran_for_ms": "7", "status": "12"}
    assert not merge.check_fields(merge.GROUP_RULES, g, model.Group(model.Category.WATCHDOG, "k", detail={"new": "x"}))


def test_a_field_without_a_rule_is_never_merged(monkeypatch):
    rules = dict(merge.RESULT_RULES)
    del rules["networks"]
    monkeypatch.setattr(merge, "RESULT_RULES", rules)
    assert not merge.merge_into(ParserState(), ParserState(track=True))


def test_caps_reached_are_not_merged():
    s, w = ParserState(), ParserState(track=True)
    s.result.versions["2.21.5"] = {f"h:{i}" for i in range(model.MAX_SET - 1)}
    w.result.versions["2.21.5"] = {"h:a", "h:b"}
    assert not merge.check(s, w)
    w.result.versions["2.21.5"] = {"h:a"}
    assert merge.check(s, w)
