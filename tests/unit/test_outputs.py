"""The output table (``outputs.py``): every format has its row, the table is pinned, the CLI writes from it.

A new format is one ``OutputFormat`` member plus its row in ``to_output``; these tests then show it (and the
flag it adds to every command's ``--help``).
"""

from __future__ import annotations

import os
import stat

import pytest

from nccl_doctor.cli import PRIVATE_REPORTS, build_parser, main
from nccl_doctor.outputs import OUTPUTS, Output, OutputFormat, OutputOptions, to_output
from nccl_doctor.report import Report
from tests.helpers import sysfs_builder

UMASK = 0o022


@pytest.mark.parametrize("kind", list(OutputFormat))
def test_to_output_is_exhaustive(kind):
    """Every member maps to its row and renders a report (pip-audit's ``test_to_format_is_exhaustive``)."""
    out = to_output(kind)
    assert isinstance(out, Output) and out.name is kind
    assert isinstance(out.render(Report(command="probe"), OutputOptions()), str)


def test_the_table_is_pinned():
    assert [(o.name.value, o.flag, o.dest, o.private, o.keeps_link) for o in OUTPUTS] == [
        ("json", "--json-out", "json_out", True, False),
        ("junit", "--junit-out", "junit_out", True, False),
        ("prom", "--prom-out", "prom_out", False, True),  # node_exporter's collector user reads it
    ]
    assert frozenset({"probe", "preflight"}) == PRIVATE_REPORTS


def test_every_command_takes_every_file_flag(tmp_path):
    for command in ("probe", "parse", "bench", "preflight", "plan", "explain"):
        argv = [command, *_required(command), *[a for out in OUTPUTS for a in (out.flag, str(tmp_path / out.dest))]]
        parsed = build_parser(argv).parse_args(argv)
        assert [getattr(parsed, out.dest) for out in OUTPUTS] == [tmp_path / out.dest for out in OUTPUTS]


def _required(command: str) -> list[str]:
    return {"parse": ["a.log"], "plan": ["--params", "7B"]}.get(command, [])


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_private_reports_are_written_0600_and_prom_for_the_collector(tmp_path, capsys):
    """probe's JSON and JUnit hold the node's inventory: 0600; its metrics are for node_exporter's user."""
    root = sysfs_builder.build(sysfs_builder.cloud_vm(), tmp_path / "node")
    files = {kind: tmp_path / f"probe.{kind}" for kind in OutputFormat}
    old = os.umask(UMASK)
    try:
        main(["probe", "--root", str(root), "--format", "json",
              *[arg for out in OUTPUTS for arg in (out.flag, str(files[out.name]))]])
    finally:
        os.umask(old)
    capsys.readouterr()
    assert {kind: _mode(path) for kind, path in files.items()} == {
        OutputFormat.JSON: 0o600, OutputFormat.JUNIT: 0o600, OutputFormat.PROM: 0o644}
    assert files[OutputFormat.JUNIT].read_text().startswith("<?xml")
    assert "nccl_doctor_" in files[OutputFormat.PROM].read_text()


def test_a_public_report_keeps_the_umask_mode(tmp_path, capsys):
    out = tmp_path / "codes.json"
    old = os.umask(UMASK)
    try:
        assert main(["explain", "--json-out", str(out)]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    assert _mode(out) == 0o644


def test_two_outputs_on_one_file_are_refused_naming_every_flag(tmp_path, capsys):
    same = str(tmp_path / "r")
    assert main(["explain", "--json-out", same, "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["parse", "x.log", "--json-out", same, "--junit-out", same]) == 2
    assert capsys.readouterr().err == ("nccl-doctor parse: error: two of --json-out, --junit-out and --prom-out name "
                                       "the same file\n")
