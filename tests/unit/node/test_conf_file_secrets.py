"""``NCCL_CONF_FILE`` may name any readable file: only its ``NCCL_*`` lines reach the report and the
snapshot (other lines are blanked, so line numbers stay NCCL's)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.node.ncclenv import nccl_lines
from tests.helpers import sysfs_builder as b

pytestmark = pytest.mark.usefixtures("no_nccl_env")

CONF = "SECRET_TOKEN=abc-5e1f\n# password: hunter2-9c\nNCCL_IB_HCA=mlx5\n  NCCL_DEBUG = INFO\nx=NCCL_y\n"


def member_text(snap: Path, path: str) -> str:
    with tarfile.open(snap) as tar:
        fh = tar.extractfile(path.lstrip("/"))
        assert fh is not None
        return fh.read().decode()


def test_nccl_lines_keeps_only_nccl_settings_and_the_line_numbers():
    assert nccl_lines(CONF) == "\n\nNCCL_IB_HCA=mlx5\n  NCCL_DEBUG = INFO\n\n"


def test_live_conf_file_secrets_reach_neither_report_nor_snapshot(tmp_path, monkeypatch, capsys):
    conf = tmp_path / "token.conf"
    conf.write_text(CONF)
    monkeypatch.setenv("NCCL_CONF_FILE", str(conf))
    snap = tmp_path / "live.tar.gz"
    assert main(["probe", "--format", "json", "--snapshot", str(snap)]) in (0, 1)
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert doc["settings"]["NCCL_IB_HCA"] == {"value": "mlx5", "source": str(conf)}
    kept = member_text(snap, str(conf))
    for secret in ("SECRET_TOKEN", "abc-5e1f", "hunter2-9c"):
        assert secret not in out and secret not in kept
    assert kept.count("\n") == CONF.count("\n") - 1 and "NCCL_IB_HCA=mlx5" in kept


def test_a_snapshot_of_a_filtered_conf_file_replays_the_same_settings(tmp_path, monkeypatch, capsys):
    spec = b.dgx_h100()
    spec["files"] = {"/etc/site.conf": CONF}
    root = b.build(spec, tmp_path / "root")
    monkeypatch.setenv("NCCL_CONF_FILE", "/etc/site.conf")
    snap = tmp_path / "node.tar.gz"
    assert main(["probe", "--root", str(root), "--format", "json", "--snapshot", str(snap)]) in (0, 1)
    first = json.loads(capsys.readouterr().out)
    main(["probe", "--root", str(snap), "--format", "json"])
    second = json.loads(capsys.readouterr().out)
    assert "SECRET" not in member_text(snap, "/etc/site.conf")
    assert [f for f in first["findings"] if f["where"].get("line")] == [f for f in second["findings"] if f["where"].get("line")]
    assert first["settings"] == second["settings"] and set(first["settings"]) <= {"NCCL_IB_HCA", "NCCL_DEBUG ",
                                                                                   "  NCCL_DEBUG ", "NCCL_CONF_FILE"}
