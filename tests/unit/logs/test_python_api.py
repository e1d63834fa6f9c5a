"""The documented Python entry points of parse (README: "From Python"): preflight and users import these."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor.logs import diagnose, parse_lines, parse_paths

LOG = Path(__file__).resolve().parents[3] / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"


def test_paths_and_lines_give_the_report_the_command_renders():
    from_paths = diagnose(parse_paths([str(LOG)]))
    from_lines = diagnose(parse_lines(LOG.read_text().splitlines()))
    assert from_paths.command == "parse"
    assert from_paths.verdict.value == from_lines.verdict.value == "pass"
    assert from_paths.data["inter_node"] == from_lines.data["inter_node"]
