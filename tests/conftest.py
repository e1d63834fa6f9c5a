"""Shared fixtures: clean colour env, and namespace clusters that always tear down."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from tests.helpers import netns

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch):
    """Renderers must not depend on the developer's terminal settings."""
    for var in ("FORCE_COLOR", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def no_nccl_env(monkeypatch):
    """The probe reads NCCL_*/GLOO_* from the environment: a developer's own must not change its findings."""
    for k in [k for k in os.environ if k.startswith(("NCCL_", "GLOO_"))]:
        monkeypatch.delenv(k)


@pytest.fixture(scope="module")
def dgx(tmp_path_factory):
    """A DGX-H100-like sysfs/procfs tree (``sysfs_builder.dgx_h100``), built once per module."""
    from tests.helpers import sysfs_builder

    return sysfs_builder.build(sysfs_builder.dgx_h100(), tmp_path_factory.mktemp("dgx"))


@pytest.fixture
def snap(dgx, tmp_path, capsys):
    """A snapshot of the ``dgx`` tree made by ``probe --snapshot`` (its output swallowed)."""
    path = tmp_path / "node.tar.gz"
    assert main(["probe", "--root", str(dgx), "--snapshot", str(path)]) == 0
    capsys.readouterr()
    return path


def _torch_missing() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return f"torch is not installed ({exc}): pip install torch"
    return None


SYSTEM = ROOT / "tests" / "system"


def pytest_configure(config):
    """Each xdist worker gets a TMPDIR of its own, so a test that checks what its processes left in the
    temporary directory sees its own leftovers, never those of a test running beside it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        own = tempfile.mkdtemp(prefix=f"ncd-tests-{worker}-")
        os.chmod(own, 0o755)  # as /tmp is to a process of another user (munged runs as munge)
        os.environ["TMPDIR"] = own
        tempfile.tempdir = None  # re-read TMPDIR
        config.add_cleanup(lambda: shutil.rmtree(own, ignore_errors=True))


@pytest.hookimpl(tryfirst=True)  # before -m selects: the serial marks below count
def pytest_collection_modifyitems(config, items):
    """Skip, with the printed reason, what this machine cannot run: torch tests need torch; namespaces
    need root; a Slurm cluster needs namespaces and slurmctld/slurmd/munge installed. System tests
    (namespaces, Slurm daemons: whole clusters of processes, CPU-bound on two cores) are ``serial``: .ci/run
    runs them after the parallel run. Run beside the unit tests, in one xdist worker, they made the whole run
    slower (774 s against about 670 s) and missed their own deadlines."""
    for item in items:
        if SYSTEM in item.path.parents or "netns" in item.keywords or "slurm" in item.keywords:
            item.add_marker(pytest.mark.serial)
    torch_reason = _torch_missing() if any("torch" in item.keywords for item in items) else None
    netns_reason = netns.can_use_netns()
    slurm_reason = None
    if any("slurm" in item.keywords for item in items):
        from tests.helpers import slurm

        slurm_reason = slurm.can_run_slurm()
    for item in items:
        reason = slurm_reason if "slurm" in item.keywords else netns_reason if "netns" in item.keywords else None
        reason = reason or (torch_reason if "torch" in item.keywords else None)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def cluster_factory():
    """``make(n, **kw)`` builds a started ``netns.Cluster``; all are torn down after the test."""
    made: list[netns.Cluster] = []

    def make(n: int, **kw) -> netns.Cluster:
        c = netns.Cluster(n, **kw)
        made.append(c)
        return c.up()

    try:
        yield make
    finally:
        for c in made:
            c.down()
            assert not netns.leftovers(c.prefix), f"namespaces left behind by {c.prefix}"


@pytest.fixture
def venv_env():
    """Environment for subprocesses: this interpreter's bin first, quiet torch warnings."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PYTHONWARNINGS"] = "ignore"
    return env
