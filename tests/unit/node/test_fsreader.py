"""``probe --root DIR`` reads a tree bounded: a FIFO where a file should be never hangs it, a device is never
opened, a 1 GiB file costs no memory; each is skipped with ND227. Run in a subprocess with a timeout, so a
regression fails the test instead of hanging the run."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.node.fsreader import MAX_FILE_BYTES, FsReader
from tests.helpers import sysfs_builder as b

ROOT = Path(__file__).resolve().parents[3]
HANG = 60  # seconds: the probe of a fixture tree takes well under one
# Runs the probe in a child and prints its JSON report's findings and the child's peak memory in MiB.
PROBE_AND_MEASURE = """
import contextlib, io, json, sys
from nccl_doctor.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["probe", "--root", sys.argv[1], "--format", "json"])
hwm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"code": code, "findings": json.loads(out.getvalue())["findings"], "peak_mib": hwm_kib // 1024}))
"""
# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across fork and exec, so a child of a pytest
# process grown to 500 MB would report 500 MB whatever it did; VmHWM belongs to the child's own memory map.


def probe_in_child(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_"))}
    res = subprocess.run([sys.executable, "-c", PROBE_AND_MEASURE, str(root)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=HANG, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def skipped(doc: dict) -> list[tuple[str, str]]:
    return [(f["where"]["file"], f["message"]) for f in doc["findings"] if f["code"] == "ND227"]


def test_a_fifo_in_the_tree_is_skipped_not_waited_on(tmp_path):
    root = b.build(b.dgx_h100(), tmp_path / "root")
    (root / "etc" / "hosts").unlink()
    os.mkfifo(root / "etc" / "hosts")
    doc = probe_in_child(root)
    assert doc["code"] in (0, 1)
    [(path, message)] = skipped(doc)
    assert path == "/etc/hosts" and "a FIFO" in message
    assert stat.S_ISFIFO(os.lstat(root / "etc" / "hosts").st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root (CI runs as root)")
def test_a_device_in_the_tree_is_never_opened(tmp_path):
    """A device node where /etc/nccl.conf should be (a tape would rewind, a tty hang): skipped."""
    root = b.build(b.dgx_h100(), tmp_path / "root")
    os.mknod(root / "etc" / "nccl.conf", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # a /dev/zero: endless
    [(path, message)] = skipped(probe_in_child(root))
    assert path == "/etc/nccl.conf" and "a character device" in message


def test_a_1_gib_file_is_not_read_into_memory(tmp_path):
    """A sparse 1 GiB /etc/hosts (no disk used): the probe stops at 1 MiB and says so; its peak memory stays
    far below the file (it took 2.1 GB before)."""
    root = b.build(b.dgx_h100(), tmp_path / "root")
    with open(root / "etc" / "hosts", "r+b") as fh:
        fh.truncate(1 << 30)
    doc = probe_in_child(root)
    [(path, message)] = skipped(doc)
    assert path == "/etc/hosts" and f"larger than {MAX_FILE_BYTES} bytes" in message
    assert doc["peak_mib"] < 256, doc["peak_mib"]


def test_files_up_to_the_limit_are_read_whole(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hosts").write_bytes(b"#" * MAX_FILE_BYTES)
    fs = FsReader(tmp_path)
    assert len(fs.read("/etc/hosts") or "") == MAX_FILE_BYTES and fs.skipped == {}
