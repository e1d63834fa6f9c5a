"""Stage files: written by each rank, read back by the launcher."""

import threading
import time

from nccl_doctor.cluster import stages
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, StageFile, read_stages


def test_stage_files_roundtrip(tmp_path):
    env = {stages.STAGE_DIR_ENV: str(tmp_path)}
    stages.StageFile(0, "n1", env).set("done", code=1)
    stages.StageFile(1, "n1", env).set("all_gather inter 1 MiB")
    assert not stages.StageFile(0, "n1", {}).managed
    records = stages.read_stages(tmp_path)
    assert [(s.rank, s.stage, s.code) for s in records] == [(0, "done", 1), (1, "all_gather inter 1 MiB", None)]


def test_shared_stage_names_are_the_strings_in_stage_files_and_json(tmp_path):
    assert [s.value for s in stages.Stage] == ["init", "done", "failed", "start-up", "rendezvous", "shutdown"]
    stages.StageFile(0, "n1", {stages.STAGE_DIR_ENV: str(tmp_path)}).set(stages.Stage.DONE, code=0)
    assert '"stage": "done"' in (tmp_path / "rank0.json").read_text()
    (record,) = stages.read_stages(tmp_path)
    assert record.stage == stages.Stage.DONE and type(record.stage) is str


def test_a_failing_rank_waits_for_rank_0_to_record_its_code_then_leaves(tmp_path):
    """A failing rank's exit makes torchrun stop rank 0: it leaves only once rank 0 recorded its code (its
    report printed), or at once when rank 0 is on another node (no file here), or at the limit."""
    env = {STAGE_DIR_ENV: str(tmp_path)}
    rank0, rank1 = StageFile(0, "n1", env), StageFile(1, "n1", env)
    rank1.wait_for_rank0(5.0)  # no rank0.json here: rank 0 is elsewhere, nothing to wait for
    rank0.set("init")
    seen: list[int | None] = []

    def record_later() -> None:
        time.sleep(0.3)
        rank0.set("failed", code=1)

    t = threading.Thread(target=record_later)
    t.start()
    rank1.wait_for_rank0(30.0)
    seen.append(read_stages(tmp_path)[0].code)
    t.join()
    assert seen == [1]  # it returned after rank 0's code, not before
    start = time.monotonic()
    StageFile(2, "n1", env).wait_for_rank0(0.2)  # recorded already: no wait
    assert time.monotonic() - start < 0.2
