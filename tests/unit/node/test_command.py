"""``nccl-doctor probe`` through the CLI: JSON, exit codes, and one-line errors for a bad --root."""

import json

import pytest

from nccl_doctor.cli import main

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_cli_json_and_exit_codes(roots, capsys):
    rc = main(["probe", "--root", str(roots["dgx_h100"]), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["verdict"] == "pass" and doc["command"] == "probe"
    assert main(["probe", "--root", str(roots["degraded_ib"]), "--strict"]) == 1
    out = capsys.readouterr().out
    assert "Recommended exports" in out and "export NCCL_IB_HCA==mlx5_0:1,mlx5_3:1" in out
    assert main(["probe", "--root", "/nonexistent-root"]) == 2
    assert "error: --root /nonexistent-root" in capsys.readouterr().err


def test_cli_fail_exit(roots, capsys, monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")
    assert main(["probe", "--root", str(roots["dgx_h100"])]) == 1
    assert "ND202" in capsys.readouterr().out


def test_root_not_a_snapshot_or_missing(tmp_path, capsys):
    text = tmp_path / "somefile.txt"
    text.write_text("hello\n")
    empty = tmp_path / "empty.tar.gz"
    empty.write_bytes(b"")
    for path in (text, empty):
        assert main(["probe", "--root", str(path)]) == 2
        assert f"--root {path}: not a directory or a .tar.gz snapshot" in one_line_error(capsys)
    assert main(["probe", "--root", str(tmp_path / "nope")]) == 2
    assert "does not exist" in one_line_error(capsys)
