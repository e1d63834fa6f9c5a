"""A command's payload writes its own keys after the report's envelope, and can never change the envelope:
``"verdict": "pass"`` from a payload beside a FAIL finding is refused, not rendered."""

from __future__ import annotations

import json

import pytest

from nccl_doctor.payload import ENVELOPE
from nccl_doctor.render import render_json, report_dict
from nccl_doctor.report import Finding, Report, Severity
from tests.helpers.payloads import Doc


def _failing(payload: Doc | None = None) -> Report:
    return Report(command="probe", payload=payload,
                  findings=[Finding(code="ND001", severity=Severity.FAIL, message="broken")])


@pytest.mark.parametrize("key", ENVELOPE)
def test_a_payload_writing_an_envelope_key_is_refused(key):
    with pytest.raises(ValueError, match=f"own key '{key}'"):
        report_dict(_failing(Doc({"host": "n1", key: "pass"})))


def test_the_payload_follows_the_envelope_and_drain_follows_the_payload():
    report = _failing(Doc({"host": "n1", "exports": []}))
    report.drain = [{"node": "n1", "drained": True}]
    doc = json.loads(render_json(report))
    assert list(doc) == ["schema_version", "tool", "tool_version", "command", "verdict", "summary", "host",
                         "exports", "drain", "findings"]
    assert doc["verdict"] == "fail"
