"""``nccl-doctor parse`` on streams: named FIFOs, bash process substitution, character devices."""

from __future__ import annotations

import gzip
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from nccl_doctor.cli import main

ROOT = Path(__file__).resolve().parents[3]
GOOD = ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"


def _write_slowly(fifo: Path, data: bytes) -> None:
    """The writer end of a FIFO: one byte first, then the rest, so the reader sees a partial head."""
    with open(fifo, "wb") as fh:
        fh.write(data[:1])
        fh.flush()
        time.sleep(0.2)
        fh.write(data[1:])


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_named_fifo_is_read_as_a_stream(tmp_path, capsys, compress):
    data = GOOD.read_bytes()
    data = gzip.compress(data) if compress else data
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    writer = threading.Thread(target=_write_slowly, args=(fifo, data), daemon=True)
    writer.start()
    rc = main(["parse", "--format", "json", str(fifo)])
    writer.join(timeout=10)
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["inter_node"]["transport"] == "IB" and doc["hosts"] == ["node01", "node02"]
    assert doc["inputs"][0]["lines"] == len(GOOD.read_text().splitlines())


def test_null_device_is_empty_input(tmp_path, capsys):
    null = tmp_path / "null"
    try:  # a private /dev/null: the container's own may be a plain file
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod not permitted (needs CAP_MKNOD)")
    rc = main(["parse", str(null)])
    err = capsys.readouterr().err
    assert rc == 2 and "empty, no NCCL log lines" in err and err.count("\n") == 1


def test_endless_device_and_socket_are_refused(tmp_path, capsys):
    assert stat.S_ISCHR(os.stat("/dev/zero").st_mode)
    rc = main(["parse", "/dev/zero"])
    err = capsys.readouterr().err
    assert rc == 2 and "/dev/zero: an endless device" in err
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        rc = main(["parse", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and "not a regular file, FIFO or character device" in err
