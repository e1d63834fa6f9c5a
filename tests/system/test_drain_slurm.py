"""``--drain-on-fail`` and ``examples/slurm/node-check.sh`` on a real Slurm cluster in namespaces: the node
whose check fails ends DRAIN with the finding's code in its reason, the healthy ones stay IDLE.

One cluster per test (2-3 nodes, about 1 s to start); never more than one at a time."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import slurm

ROOT = Path(__file__).resolve().parents[2]
NODE_CHECK = ROOT / "examples" / "slurm" / "node-check.sh"
SBATCH = ROOT / "examples" / "preflight.sbatch"
VENV_BIN = Path(sys.executable).parent
STATE_WAIT_S = 45  # a drained node shows in scontrol within a second; a prolog runs at allocation
DEADLINE = 90  # PREFLIGHT_TIMEOUT, as in test_preflight_slurm.py

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(240)]


@pytest.fixture
def job_env():
    """The submitter's environment, as a user's: the venv on PATH, interfaces named as in a real job."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env.update(PYTHONWARNINGS="ignore", NCCL_SOCKET_IFNAME="=eth1", GLOO_SOCKET_IFNAME="eth1")
    return env


def node(sc: slurm.SlurmCluster, name: str) -> dict[str, str]:
    """``scontrol show node`` as a dict (Reason runs to the end of the line: it holds spaces)."""
    out = sc.client(["scontrol", "show", "node", "-o", name]).stdout.strip()
    head, _, reason = out.partition(" Reason=")
    fields = dict(kv.split("=", 1) for kv in head.split() if "=" in kv)
    fields["Reason"] = reason
    return fields


def wait_drained(sc: slurm.SlurmCluster, name: str) -> dict[str, str]:
    deadline = time.monotonic() + STATE_WAIT_S
    while "DRAIN" not in (got := node(sc, name))["State"] and time.monotonic() < deadline:
        time.sleep(0.25)
    return got


def wait_file(path: Path) -> str:
    """``path``'s text once it exists (the node check writes it after the drain, as it renders)."""
    deadline = time.monotonic() + STATE_WAIT_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.25)
    return path.read_text()


def test_node_whose_probe_fails_in_its_job_step_is_drained_the_other_stays_idle(job_env):
    with slurm.SlurmCluster(2) as sc:
        step = sc.dir / "probe-step.sh"
        step.write_text("#!/bin/bash\n"  # n2's step names an interface it does not have: its probe FAILs
                        "srun --ntasks-per-node=1 bash -c '[ \"$SLURMD_NODENAME\" = n2 ] && "
                        "export NCCL_SOCKET_IFNAME=nosuch; "
                        "exec nccl-doctor probe --drain-on-fail --json-out \"probe-$SLURMD_NODENAME.json\"'\n")
        rc, out = sc.submit(step, env=job_env, timeout=60)
        n1, n2 = node(sc, "n1"), wait_drained(sc, "n2")
        docs = {h: json.loads((sc.dir / f"probe-{h}.json").read_text()) for h in ("n1", "n2")}
    assert rc == 1, out  # n2's FAIL is the step's exit code; draining did not change it
    assert "DRAIN" in n2["State"] and n2["Reason"].startswith("nccl-doctor ND2"), (n2, out)
    assert "nosuch" in n2["Reason"]
    assert n1["State"] == "IDLE" and n1["Reason"] == "", n1
    assert docs["n2"]["drain"] == [{"node": "n2", "reason": n2["Reason"].split(" [")[0], "drained": True,
                                    "why_not": ""}]
    assert docs["n1"]["verdict"] != "fail" and "drain" not in docs["n1"]
    assert "drained n2 in Slurm" in out


def _others_can_run_python() -> str | None:
    """None when user nobody can run this interpreter, else why not (the skip reason)."""
    real = Path(os.path.realpath(sys.executable))
    for d in [*real.parents][::-1]:
        if not d.stat().st_mode & 0o001:
            return f"user nobody cannot reach this Python ({d} is not searchable by others)"
    return None


@pytest.mark.skipif(_others_can_run_python() is not None, reason=str(_others_can_run_python()))
def test_unprivileged_user_cannot_drain_and_says_why(job_env):
    """The same failing probe run as nobody: scontrol refuses, the report says so, the node stays IDLE."""
    with slurm.SlurmCluster(1) as sc:
        step = sc.dir / "probe-nobody.sh"
        step.write_text("#!/bin/bash\nsrun setpriv --reuid=nobody --regid=nogroup --clear-groups "
                        "env NCCL_SOCKET_IFNAME=nosuch nccl-doctor probe --drain-on-fail\n")
        rc, out = sc.submit(step, env=job_env, timeout=60)
        n1 = node(sc, "n1")
    assert rc == 1, out
    assert n1["State"] == "IDLE", n1
    assert "ND002 (host n1) not drained: n1:" in out and "draining needs root" in out, out


class PrologCluster(slurm.SlurmCluster):
    """The test cluster with ``examples/slurm/node-check.sh`` as its Prolog, at allocation. Each node reads
    its own settings file (``env-<node>``), as a site's /etc/default/nccl-doctor."""

    def _write_config(self) -> None:
        super()._write_config()
        wrapper = self.dir / "prolog.sh"
        wrapper.write_text(f"#!/bin/bash\nexport NCCL_DOCTOR_ENV={self.dir}/env-$(hostname -s)\n"
                           f"exec {NODE_CHECK}\n")
        wrapper.chmod(0o755)
        with self.conf.open("a") as fh:
            fh.write(f"Prolog={wrapper}\nPrologFlags=Alloc\n")

    def settings(self, name: str, extra: str = "") -> None:
        prom = self.dir / f"prom-{name}"
        prom.mkdir()
        (self.dir / f"env-{name}").write_text(
            f"PATH={VENV_BIN}:$PATH\nNCCL_SOCKET_IFNAME==eth1\nGLOO_SOCKET_IFNAME=eth1\nPYTHONWARNINGS=ignore\n"
            f"NCCL_DOCTOR_LOG={self.dir}/node-check-{name}.log\nNCCL_DOCTOR_PROM_DIR={prom}\n{extra}")


def test_prolog_node_check_drains_the_failing_node_only():
    sc = PrologCluster(2)
    with sc:
        sc.settings("n1")
        sc.settings("n2", "NCCL_SOCKET_IFNAME=nosuch\n")  # the site's setting, wrong on n2 only
        job = sc.dir / "true.sh"
        job.write_text("#!/bin/sh\ntrue\n")
        sc.sbatch(job)
        n2 = wait_drained(sc, "n2")
        prom = wait_file(sc.dir / "prom-n2" / "nccl_doctor_probe.prom")
        wait_file(sc.dir / "prom-n1" / "nccl_doctor_probe.prom")  # n1's check is over too
        n1 = node(sc, "n1")
        logs = {h: (sc.dir / f"node-check-{h}.log").read_text() for h in ("n1", "n2")}
    assert "DRAIN" in n2["State"] and n2["Reason"].startswith("nccl-doctor ND2"), (n2, logs["n2"])
    assert "DRAIN" not in n1["State"] and n1["Reason"] == "", (n1, logs["n1"])
    assert "drained n2 in Slurm" in logs["n2"]
    assert 'nccl_doctor_verdict{command="probe",host="n2"} 2.0' in prom


def test_preflight_drains_the_throttled_node_only(job_env):
    job_env.update(PREFLIGHT_TIMEOUT=str(DEADLINE), PREFLIGHT_ARGS="--drain-on-fail", SBATCH_GPUS_PER_NODE="0")
    with slurm.SlurmCluster(3) as sc:
        sc.throttle(sc.nodes[1])
        rc, out = sc.submit(SBATCH, env=job_env, timeout=DEADLINE + 30)
        states = {n.name: node(sc, n.name) for n in sc.nodes}
    assert rc == 1, out
    assert "DRAIN" in states["n2"]["State"] and states["n2"]["Reason"].startswith("nccl-doctor ND302"), states
    assert [n for n, s in states.items() if "DRAIN" in s["State"]] == ["n2"], states
    assert "drained n2 in Slurm" in out
