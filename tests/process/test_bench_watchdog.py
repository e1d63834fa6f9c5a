"""Our per-rank watchdog on real Gloo ranks (issue 21, point 1): a rank that never arrives at a sub-group's
creation. NCCL's communicator creation has no timeout of its own (a split or an init waits in its bootstrap for
ever); Gloo's would, after PyTorch's timeout, so the ranks here get a PyTorch timeout far past the watchdog's
(``watchdog.torch_timeout_s``): what ends the stage is the watchdog, as on NCCL. It records the stage and the
missing rank in the rank's stage file (what bench's launcher reports) and exits 1, with the main thread still
blocked inside ``new_group``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nccl_doctor.cluster.net import free_port
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, read_stages

pytestmark = pytest.mark.torch
WATCH_S = 3.0

SUBGROUP = r"""
import os, sys
import torch.distributed as dist
from nccl_doctor.bench import worker as bw

rank = int(os.environ["RANK"])
bw.init_from_env(timeout_s=120, force_cpu=True)  # PyTorch's timeout: far past the watchdog's
stages = bw.Stages(rank, f"host{rank}", os.environ, timeout_s=float(sys.argv[1]))
stages.hosts.update({0: "host0", 1: "host1"})  # as run_bench knows them after the topology stage
stages.enter("groups")  # rank 1 never gets past this (NCCL_DOCTOR_TEST_STALL=1:groups)
bw._guard(stages, [0, 1], {}, lambda: dist.new_group([0, 1]))
print("new_group returned", flush=True)
"""


def test_a_rank_missing_at_a_subgroups_creation_is_named_by_the_watchdog_within_its_timeout(tmp_path):
    port = free_port()
    base = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", GLOO_SOCKET_IFNAME="lo",
                NCCL_DOCTOR_TEST_STALL="1:groups", **{STAGE_DIR_ENV: str(tmp_path)})
    procs = [subprocess.Popen([sys.executable, "-c", SUBGROUP, str(WATCH_S)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(base, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(2)]
    try:
        out, err = procs[0].communicate(timeout=90)
        assert procs[0].returncode == 1, err[-3000:]
        assert "new_group returned" not in out  # the main thread never got out: the watchdog ended the rank
        assert procs[1].poll() is None  # rank 1 is still stuck before the stage
    finally:
        for p in procs:
            p.kill()
            p.wait()
    rank0 = next(s for s in read_stages(tmp_path) if s.rank == 0)
    assert (rank0.stage, rank0.code) == ("groups", 1)
    assert rank0.overdue is not None and rank0.overdue.missing == (1,) and rank0.overdue.missing_hosts == ("host1",)
    assert rank0.overdue.timeout_s == WATCH_S and WATCH_S <= rank0.overdue.waited_s < WATCH_S + 2
    assert "stage groups outlived --collective-timeout (3 s) on rank 0 (host0): ranks that never reached it: " \
           "rank 1 (host1)" in err
    assert json.loads((tmp_path / "rank0.json").read_text())["overdue"]["missing"] == [1]


def test_a_stage_that_failed_is_no_longer_watched_and_closed_stages_stop_their_thread():
    """A guarded call that raises leaves its stage unwatched (the failure is the report): an armed watchdog
    would otherwise end the process ``timeout_s`` later, whatever it is doing by then (an in-process test
    killed its pytest-xdist worker that way). ``close`` stops the thread."""
    from nccl_doctor.bench import worker as bw

    with bw.Stages(0, "here", {}, timeout_s=30.0) as stages:
        stages.enter("topology")

        def boom() -> None:
            raise RuntimeError("a closed Gloo pair")

        with pytest.raises(bw.BenchFailure):
            bw._guard(stages, [0], {}, boom)
        assert stages.watch is not None and not stages.watch.armed
    assert stages.stop is not None and stages.stop.is_set()


def test_a_host_name_read_back_from_the_store_is_capped():
    """The attack: whoever reaches the rendezvous store writes a megabyte as a rank's mark; the watchdog names
    that rank with at most a host name's length of it (the report and the stage file stay small)."""
    from datetime import timedelta

    import torch.distributed as dist

    from nccl_doctor.bench import worker as bw

    store = dist.TCPStore("127.0.0.1", free_port(), 1, True, timeout=timedelta(seconds=10))
    stages = bw.Stages(0, "here", {}, store=store)
    stages.enter("all_gather world 1 MiB")
    store.set("ncd/all_gather world 1 MiB/1", "h" * (1 << 20))
    assert stages._host(1, store) == "h" * 255
