"""``parse`` on a binary file says so in one line (exit 2), where it used to count the 'lines' of an
executable; a log with a few stray bytes (a NUL block from a crash, a cut UTF-8 sequence) still parses
(issue 12, point 8)."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

from nccl_doctor.cli import main

LOG = Path(__file__).resolve().parents[3] / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"


def _elf_like() -> bytes:
    """The start of an executable: a header, tables of small integers (many NULs), strings."""
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00>\x00\x01\x00\x00\x00"
    table = b"".join(i.to_bytes(8, "little") for i in range(4096))
    return header + table + b"\n".join([b"GLIBC_2.34", b"__libc_start_main", b"ls"]) + bytes(300)


def test_an_executable_is_named_a_binary_file(tmp_path, capsys):
    path = tmp_path / "ls"
    path.write_bytes(_elf_like())
    assert main(["parse", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "binary file" in err and "Traceback" not in err, err


def test_a_gzipped_binary_and_a_binary_among_text_files_are_named(tmp_path, capsys):
    packed = tmp_path / "core.gz"
    packed.write_bytes(gzip.compress(bytes(range(256)) * 64))  # undecodable and control bytes, few NULs
    text = tmp_path / "notes.txt"
    text.write_text("no nccl here\n")
    assert main(["parse", str(packed)]) == 2
    assert "binary file" in capsys.readouterr().err
    assert main(["parse", str(packed), str(text)]) == 2
    err = capsys.readouterr().err
    assert "no NCCL log lines" in err and f"binary, not logs: {packed}" in err, err


def test_a_log_with_stray_bytes_still_parses(tmp_path, capsys):
    path = tmp_path / "rank0.log"
    shutil.copy(LOG, path)
    raw = path.read_bytes()
    cut = raw.index(b"\n", len(raw) // 2) + 1
    path.write_bytes(raw[:cut] + b"\x00\x00\xff\xfe garbage \x01\x02\n" + raw[cut:] + bytes(64))
    assert main(["parse", "--format", "json", str(path)]) in (0, 1)
    assert "binary" not in capsys.readouterr().err


def test_a_text_file_without_nccl_lines_is_not_called_binary(tmp_path, capsys):
    path = tmp_path / "train.log"
    path.write_text("epoch 1 loss 0.3 ünïcödé\n" * 50)
    assert main(["parse", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no NCCL log lines in 50 lines" in err and "binary" not in err


def test_a_fifo_without_nccl_lines_is_not_opened_twice(tmp_path):
    """The binary check re-reads a file's start: a FIFO, already drained, would block it forever."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    child = subprocess.Popen([sys.executable, "-m", "nccl_doctor", "parse", str(fifo)], stderr=subprocess.PIPE,
                             text=True)
    try:
        with open(fifo, "wb") as fh:
            fh.write(b"\x00\x01\x02 not a log\n" * 10)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 2 and "no NCCL log lines" in err, err
