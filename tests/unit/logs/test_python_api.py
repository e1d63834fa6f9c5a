"""The documented Python entry points of parse (README: "From Python"): preflight and users import these."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nccl_doctor.logs import diagnose, parse_lines, parse_paths

LOG = Path(__file__).resolve().parents[3] / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"


def test_paths_and_lines_give_the_report_the_command_renders():
    from_paths = diagnose(parse_paths([str(LOG)]))
    from_lines = diagnose(parse_lines(LOG.read_text().splitlines()))
    assert from_paths.command == "parse"
    assert from_paths.verdict.value == from_lines.verdict.value == "pass"
    assert from_paths.data["inter_node"] == from_lines.data["inter_node"]


def test_the_parse_half_loads_without_the_diagnose_half():
    """A ``--jobs`` worker imports only the parse half: the package's API is loaded on first use, not by the
    package itself (a fresh interpreter, so no other test's imports count)."""
    code = ("import sys, nccl_doctor.logs.parse.parallel; "
            "print(sorted(m for m in sys.modules if m.startswith(('nccl_doctor.logs.diagnosis', 'nccl_doctor.logs.view'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
