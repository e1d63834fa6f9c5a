"""``nccl-doctor parse`` as its own process: stdin, ``python -m``, bash process substitution, and a parse
that never imports torch. No torch needed."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "nccl-logs"
GOOD = REAL / "041-h20-ib-gdrdma-cumem-2node.log"
FAILING = REAL / "057-ibext-completion-status-12-vendor-129.log"
LOGS = ROOT / "fixtures" / "logs"


def test_stdin_via_subprocess_and_no_torch():
    code = ("import sys; from nccl_doctor.cli import main; rc = main(['parse', '--format', 'json', '-']); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], input=GOOD.read_bytes(), check=False, capture_output=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["inter_node"]["transport"] == "IB"


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "parse", str(FAILING)], check=False, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1 and proc.stdout.startswith("nccl-doctor parse: FAIL")
    assert proc.stderr == ""


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("zcat") is None, reason="needs bash and zcat")
def test_bash_process_substitution_of_zcat_and_of_raw_gzip(tmp_path):
    gz = tmp_path / "job.log.gz"
    gz.write_bytes(gzip.compress(GOOD.read_bytes()))
    cmd = (f'"{sys.executable}" -m nccl_doctor parse --format json <(zcat "{gz}") <(cat "{gz}")')
    proc = subprocess.run(["bash", "-c", cmd], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [i["name"].startswith("/dev/fd/") for i in doc["inputs"]] == [True, True]
    assert doc["inputs"][0]["lines"] == doc["inputs"][1]["lines"] > 0  # gzip found by content in the pipe
    assert doc["inter_node"]["transport"] == "IB"


def test_parse_never_imports_torch():
    code = (f"import sys; from nccl_doctor.cli import main; main(['parse', {str(LOGS / 'one-comm-on-socket-beside-ib.log')!r}]); "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], check=False, capture_output=True).returncode == 0
