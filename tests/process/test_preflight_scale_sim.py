"""Node 0's protocol against many simulated followers (``benchmarks/bench_scale.py``), small enough for CI:
the real node 0 must name exactly the faulty nodes, keep one store connection per node, and pass a healthy
run. The 1,024 x 8 figures are the benchmark's own (``docs/scale.md``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.serial]  # heartbeats of many simulated nodes on the CPUs

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale.py"
NODES, RANKS = 40, 4
SPARE_CONNECTIONS = 2  # node 0's own client and its rank 0's


def run_scenarios(*names: str, tmp_path: Path) -> list[dict]:
    """Each scenario in a benchmark process of its own, all at once (each its own store port; as root its
    own network namespace): they mostly wait on heartbeats, so side by side they take the time of one."""
    argv = [sys.executable, str(BENCH), "--nodes", str(NODES), "--ranks-per-node", str(RANKS), "--procs", "2",
            "--watch-s", "10", "--rendezvous-s", "20", "--timeout", "90", "--report-dir", str(tmp_path)]
    procs = [subprocess.Popen([*argv, "--scenario", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)}) for name in names]
    try:
        done = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, done, strict=True):
        assert p.returncode == 0, err[-2000:]
    return [json.loads(line) for out, _ in done for line in out.splitlines() if line.startswith("{")]


@pytest.mark.timeout(330)
def test_node_zero_names_exactly_the_faulty_simulated_nodes(tmp_path):
    """Healthy: PASS, nobody named. Two nodes with another torch build (and eight late ones, which are
    not faults): both named, nobody else. Two nodes that fall silent during the run: both named lost."""
    healthy, inconsistent, lost = run_scenarios("healthy", "inconsistent", "lost", tmp_path=tmp_path)
    assert healthy["verdict"] == "pass", healthy
    for line in (healthy, inconsistent, lost):
        assert line["named_exactly_faulty"], line
        assert line["store_connections"] <= NODES + SPARE_CONNECTIONS, line
        assert line["acked"] >= NODES - 1 - (2 if line is lost else 0), line
    assert inconsistent["verdict"] == "fail" and inconsistent["faulty"], inconsistent
    assert lost["verdict"] == "fail" and lost["faulty"], lost
    text = (tmp_path / "lost" / "report.txt").read_text()
    assert f"[FAIL] ND407 (host {lost['faulty']})" in text  # lost during the run, named as one line
