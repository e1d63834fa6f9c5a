"""Output files are written whole or not at all: ``atomic_write`` leaves the old file (or none) and never its
temp file."""

import pytest

from nccl_doctor.files import atomic_write


def test_atomic_write_removes_its_temp_file_when_the_write_fails(tmp_path):
    busy = tmp_path / "busy"  # a non-empty directory: the final rename fails after the temp file is written
    (busy / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        atomic_write(busy, "{}")
    with pytest.raises(TypeError):  # a failure before the rename, and not an OSError
        atomic_write(tmp_path / "report.json", 42)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]
    assert [p.name for p in busy.iterdir()] == ["inside"]


def test_atomic_write_takes_bytes_and_replaces(tmp_path):
    out = tmp_path / "snap.tar.gz"
    out.write_bytes(b"old")
    atomic_write(out, b"\x1f\x8bnew")
    assert out.read_bytes() == b"\x1f\x8bnew"
    assert [p.name for p in tmp_path.iterdir()] == ["snap.tar.gz"]
