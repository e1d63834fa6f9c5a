"""``bench --prom-out`` on a real 2-rank Gloo run: busbw per group, op and size in bytes per second, the
same figures as the JSON of that run, in a file prometheus_client's own parser reads."""

import json
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.torch, pytest.mark.timeout(150)]


def test_gloo_run_busbw_in_bytes_per_second(tmp_path):
    prom, js = tmp_path / "bench.prom", tmp_path / "bench.json"
    env = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--ops", "ag,ar", "--sizes", "64K",
                           "--iters", "5", "--prom-out", str(prom), "--json-out", str(js)],
                          capture_output=True, text=True, check=False, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(js.read_text())
    busbw = {}
    for family in text_string_to_metric_families(prom.read_text()):
        for s in family.samples:
            if s.name == "nccl_doctor_bench_busbw_bytes_per_second":
                assert s.labels["command"] == "bench"
                busbw[(s.labels["group"], s.labels["op"], int(s.labels["size_bytes"]))] = s.value
            if s.name == "nccl_doctor_verdict":
                assert s.value == {"pass": 0, "warn": 1, "fail": 2}[doc["verdict"]]
    want = {(r["group"], r["op"], r["size_bytes"]): r["busbw_gbps"] * 1e9 for r in doc["results"]}
    assert set(want) == {("world", "all_gather", 65536), ("world", "all_reduce", 65536)}
    assert busbw == pytest.approx(want)
    assert all(v > 0 for v in busbw.values())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left
