"""The Slurm test harness itself: a 2-node cluster in namespaces runs a real multi-node step, then
leaves nothing behind."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers import slurm

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(120)]


def test_two_node_cluster_runs_srun_and_tears_down(tmp_path):
    script = tmp_path / "hosts.sh"
    script.write_text("#!/bin/sh\nsrun -N2 --ntasks-per-node=1 hostname | sort\necho NODES=$SLURM_JOB_NODELIST\n")
    sc = slurm.SlurmCluster(2)
    with sc:
        rc, out = sc.submit(script, timeout=60)
        assert rc == 0, out
        assert out.split() == ["n1", "n2", "NODES=n[1-2]"], out
        # the job's exit code is sbatch --wait's exit code
        fail = tmp_path / "fail.sh"
        fail.write_text("#!/bin/sh\nexit 3\n")
        rc, _ = sc.submit(fail, timeout=60)
        assert rc == 3
    assert sc.leftovers() == []
    pids = subprocess.run(["pgrep", "-f", sc.prefix], capture_output=True, text=True, check=False).stdout.split()
    assert pids == [], f"processes still naming {sc.prefix}: {pids}"
