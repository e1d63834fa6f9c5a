"""``probe --snapshot``: round trips, never overwriting what is read, and damaged archives in one line."""

import json
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.errors import InputError
from nccl_doctor.node.snapshot import check_snapshot_target
from tests.helpers import sysfs_builder as b

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("name", list(b.SPECS))
def test_snapshot_round_trip(roots, name, tmp_path, capsys, monkeypatch):
    """--snapshot captures exactly what was read; --root on it (tar.gz or extracted) gives the same JSON."""
    for k in [k for k in __import__("os").environ if k.startswith(("NCCL_", "GLOO_"))]:
        monkeypatch.delenv(k)
    snap = tmp_path / "node.tar.gz"
    assert main(["probe", "--root", str(roots[name]), "--format", "json", "--snapshot", str(snap)]) in (0, 1)
    first = json.loads(capsys.readouterr().out)
    main(["probe", "--root", str(snap), "--format", "json"])
    second = json.loads(capsys.readouterr().out)
    for doc in (first, second):
        doc.pop("root")
    assert first == second


def test_snapshot_refuses_its_own_root_archive(snap, tmp_path, capsys):
    before = snap.read_bytes()
    assert main(["probe", "--root", str(snap), "--snapshot", str(snap)]) == 2
    assert "refusing to overwrite the --root archive" in one_line_error(capsys)
    (tmp_path / "alias.tar.gz").symlink_to(snap.name)
    assert main(["probe", "--root", str(snap), "--snapshot", str(tmp_path / "alias.tar.gz")]) == 2
    assert "refusing" in one_line_error(capsys)
    assert snap.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias.tar.gz", "node.tar.gz"]  # no temp left


def test_snapshot_refuses_inside_root_tree(dgx, capsys):
    target = dgx / "etc" / "snap.tar.gz"
    assert main(["probe", "--root", str(dgx), "--snapshot", str(target)]) == 2
    assert "inside the --root tree" in one_line_error(capsys)
    assert not target.exists()


def test_snapshot_refuses_a_file_the_live_probe_reads(tmp_path):
    with pytest.raises(InputError, match="a file the probe reads"):
        check_snapshot_target(Path("/etc/hosts"), read=["/etc/hosts", "/proc/net/route"])
    check_snapshot_target(tmp_path / "ok.tar.gz", read=["/etc/hosts"])  # anything else is fine


@pytest.mark.parametrize("keep", [10, 300, 2000, -100])
def test_truncated_snapshot_is_one_line(snap, tmp_path, capsys, keep):
    data = snap.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[:keep])
    assert main(["probe", "--root", str(cut)]) == 2
    err = one_line_error(capsys)
    assert str(cut) in err and "truncated or corrupt" in err
