"""Output files that are not plain files: a FIFO, a terminal or /dev/null is written in place (never
replaced by a renamed file: as root that would replace the device for the whole machine); a disk, other
devices and sockets are refused before any work; so is a directory where no file can be made."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from nccl_doctor.cli import main

ROOT = Path(__file__).resolve().parents[2]
LOG = str(ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log")
ROOT_ONLY = "mknod needs root (CI runs as root)"
NULL_DEVICE = (1, 3)


@pytest.fixture
def null_device(tmp_path: Path) -> Path:
    """A private null device, so the test never risks the machine's own. Without root there is none to
    make, and /dev/null cannot stand in: a non-root user could not replace it, so the test would pass
    whatever the code does."""
    if os.geteuid() != 0:
        pytest.skip(ROOT_ONLY)
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(*NULL_DEVICE))
    return node


def _still_the_null_device(path: Path) -> bool:
    st = os.stat(path)
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(*NULL_DEVICE)


def test_json_and_junit_to_the_null_device_leave_it_a_device(null_device, capsys):
    assert main(["parse", LOG, "--json-out", str(null_device), "--junit-out", str(null_device)]) == 0
    assert _still_the_null_device(null_device)
    assert capsys.readouterr().err == ""


def test_json_to_a_fifo_reaches_its_reader_and_the_fifo_stays(tmp_path, capsys):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["parse", LOG, "--json-out", str(fifo)]) == 0
    reader.join(10)
    assert json.loads(got[0])["verdict"] == "pass"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.fifo"]  # no temp file beside it


def test_junit_to_a_terminal_is_written_to_it(tmp_path, capsys):
    master, slave = os.openpty()
    try:
        tty = os.ttyname(slave)
        assert main(["parse", LOG, "--junit-out", tty]) == 0
        seen = b""
        while b"</testsuites>" not in seen:
            seen += os.read(master, 65536)
        assert seen.lstrip().startswith(b"<?xml") and stat.S_ISCHR(os.stat(tty).st_mode)
    finally:
        os.close(master)
        os.close(slave)


def test_a_socket_is_refused_before_any_work(tmp_path, capsys):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(str(path))
        assert main(["parse", LOG, "--json-out", str(path)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "it is a socket, not a file" in err
        assert stat.S_ISSOCK(os.stat(path).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_ONLY)
@pytest.mark.parametrize(("kind", "dev", "what"),
                         [(stat.S_IFCHR, (1, 1), "a device"), (stat.S_IFBLK, (7, 0), "a block device")],
                         ids=["mem-like", "disk-like"])
def test_other_devices_are_refused_and_left_alone(tmp_path, capsys, kind, dev, what):
    node = tmp_path / "dev"
    os.mknod(node, 0o600 | kind, os.makedev(*dev))
    assert main(["parse", LOG, "--junit-out", str(node)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"it is {what}, not a file" in err
    st = os.stat(node)
    assert stat.S_IFMT(st.st_mode) == kind and st.st_rdev == os.makedev(*dev)


def test_a_directory_where_no_file_can_be_made_is_refused_before_any_work(capsys):
    assert main(["parse", LOG, "--json-out", "/proc/nccl-doctor-report.json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("nccl-doctor parse: error: cannot write /proc/nccl-doctor-report.json")


def test_snapshot_into_a_missing_directory_is_refused_and_nothing_is_made(tmp_path, capsys):
    target = tmp_path / "missing" / "node.tar.gz"
    assert main(["probe", "--snapshot", str(target)]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "missing").exists()


def test_snapshot_to_the_null_device_leaves_it_a_device(null_device, dgx, no_nccl_env, capsys):
    """The fixture node (a DGX H100 tree, no NCCL/Gloo variables) passes: exit 0 exactly."""
    assert main(["probe", "--root", str(dgx), "--snapshot", str(null_device)]) == 0
    assert _still_the_null_device(null_device)
    assert capsys.readouterr().err == ""
