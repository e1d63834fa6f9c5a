"""probe as its own process: on this machine's live files (against psutil and netifaces, and through a
snapshot), a snapshot write that dies part-way, and a probe/compare path that never imports torch.
No torch needed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from tests.helpers.probing import CROSS_CHECK, assert_views_agree

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    from tests.helpers import sysfs_builder as b

    return {"dgx_h100": b.build(b.dgx_h100(), tmp_path_factory.mktemp("dgx_h100"))}


def test_files_match_psutil_and_netifaces_here():
    p = subprocess.run([sys.executable, "-c", CROSS_CHECK], check=False, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert_views_agree(json.loads(p.stdout))


def test_snapshot_of_live_system_round_trips(tmp_path, capsys):
    snap = tmp_path / "live.tar.gz"
    main(["probe", "--format", "json", "--snapshot", str(snap)])
    live = json.loads(capsys.readouterr().out)
    extracted = tmp_path / "x"
    subprocess.run(["tar", "xzf", str(snap), "-C", str(extracted.mkdir() or extracted)], check=True, timeout=30)
    main(["probe", "--root", str(extracted), "--format", "json"])
    again = json.loads(capsys.readouterr().out)
    for doc in (live, again):
        doc.pop("root")
    assert live == again
    assert snap.stat().st_size < 200_000


@pytest.mark.serial  # times itself
def test_probe_never_imports_torch_and_is_fast(roots):
    code = ("import sys, time; from nccl_doctor.cli import main; t=time.perf_counter(); "
            f"rc=main(['probe','--root',{str(roots['dgx_h100'])!r},'--format','json']); "
            "sys.stderr.write(f'{time.perf_counter()-t:.3f}'); assert 'torch' not in sys.modules")
    p = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert float(p.stderr.strip().splitlines()[-1]) < 1.0


def test_failed_snapshot_write_keeps_the_old_file(dgx, snap):
    """A write that dies part-way (file size limit: EFBIG) leaves the old snapshot intact and no temp file."""
    before = snap.read_bytes()
    code = ("import resource, signal, sys; from nccl_doctor.cli import main; "
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512)); "
            f"sys.exit(main(['probe', '--root', {str(dgx)!r}, '--snapshot', {str(snap)!r}]))")
    p = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert p.returncode == 2, p.stderr
    assert "cannot write snapshot" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert len(before) > 512 and snap.read_bytes() == before
    assert [x.name for x in snap.parent.iterdir()] == [snap.name]


def test_probe_check_and_compare_never_import_torch(roots):
    """What preflight runs on every node before torch matters: probe, check, node_facts (versions passed
    in by the caller) and compare. None of it may import torch."""
    code = ("import sys; from nccl_doctor.node import check, compare, node_facts, probe_node; "
            f"node = probe_node({str(roots['dgx_h100'])!r}, {{}}); check(node); "
            "v = {'version.torch': '2.5.1', 'version.cuda': '12.4', 'version.nccl': '2.21.5'}; "
            "a = node_facts(node, {}, versions=v, host='a'); b = node_facts(node, {}, versions=v, host='b'); "
            "assert compare([a, b]) == [], compare([a, b]); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    p = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
