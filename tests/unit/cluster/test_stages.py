"""Stage files: written by each rank, read back by the launcher."""

import json
import threading
import time

from nccl_doctor.cluster import stages
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, StageFile, read_stages


def test_stage_files_roundtrip(tmp_path):
    env = {stages.STAGE_DIR_ENV: str(tmp_path)}
    stages.StageFile(0, "n1", env).record("done", code=1)
    stages.StageFile(1, "n1", env).record("all_gather inter 1 MiB")
    assert not stages.StageFile(0, "n1", {}).managed
    records = stages.read_stages(tmp_path)
    assert [(s.rank, s.stage, s.code) for s in records] == [(0, "done", 1), (1, "all_gather inter 1 MiB", None)]


def test_shared_stage_names_are_the_strings_in_stage_files_and_json(tmp_path):
    stages.StageFile(0, "n1", {stages.STAGE_DIR_ENV: str(tmp_path)}).record(stages.Stage.DONE, code=0)
    assert '"stage": "done"' in (tmp_path / "rank0.json").read_text()
    (record,) = stages.read_stages(tmp_path)
    assert record.stage == stages.Stage.DONE and type(record.stage) is str


def test_a_failing_rank_waits_for_rank_0_to_record_its_code_then_leaves(tmp_path):
    """A failing rank's exit makes torchrun stop rank 0: it leaves only once rank 0 recorded its code (its
    report printed), or at once when rank 0 is on another node (RANK - LOCAL_RANK is not 0), or at the limit."""
    env = {STAGE_DIR_ENV: str(tmp_path)}
    start = time.monotonic()
    StageFile(9, "n2", {**env, "LOCAL_RANK": "1"}).wait_for_rank0(5.0)  # rank 0 is on another node
    assert time.monotonic() - start < 1.0
    rank0, rank1 = StageFile(0, "n1", env), StageFile(1, "n1", {**env, "LOCAL_RANK": "1"})
    rank0.record("init")
    seen: list[int | None] = []

    def record_later() -> None:
        time.sleep(0.3)
        rank0.record("failed", code=1)

    t = threading.Thread(target=record_later)
    t.start()
    rank1.wait_for_rank0(30.0)
    seen.append(read_stages(tmp_path)[0].code)
    t.join()
    assert seen == [1]  # it returned after rank 0's code, not before
    start = time.monotonic()
    StageFile(2, "n1", env).wait_for_rank0(0.2)  # recorded already: no wait
    assert time.monotonic() - start < 0.2


def test_a_failing_rank_waits_for_a_rank_0_that_has_not_started_yet(tmp_path):
    """Rank 1 failed before rank 0 wrote anything (rank 0 still importing torch): leaving at once would let
    torchrun stop rank 0 before its report. It waits for the file, then for the code."""
    env = {STAGE_DIR_ENV: str(tmp_path), "LOCAL_RANK": "1"}
    rank0 = StageFile(0, "n1", {STAGE_DIR_ENV: str(tmp_path)})

    def start_then_fail() -> None:
        time.sleep(0.4)
        rank0.record("init")
        time.sleep(0.3)
        rank0.record("failed", code=1)

    t = threading.Thread(target=start_then_fail)
    t.start()
    StageFile(1, "n1", env).wait_for_rank0(30.0)
    code = read_stages(tmp_path)[0].code
    t.join()
    assert code == 1
    start = time.monotonic()  # a rank 0 that never starts is waited for at most start_s
    (tmp_path / "rank0.json").unlink()
    StageFile(1, "n1", env).wait_for_rank0(30.0, start_s=0.2)
    assert 0.2 <= time.monotonic() - start < 1.0


def test_every_named_stage_keeps_its_value():
    """Reports, stage files and preflight's store carry these strings: a rename would break readers."""
    assert {s.name: s.value for s in stages.Stage} == {
        "INIT": "init", "DONE": "done", "FAILED": "failed", "START_UP": "start-up", "RENDEZVOUS": "rendezvous",
        "SHUTDOWN": "shutdown", "PROBE": "probe", "TOPOLOGY": "topology", "GROUPS": "groups",
        "CONSISTENCY": "consistency", "RUN": "run", "VERDICT": "verdict", "NCCL_LOGS": "nccl-logs",
        "NOT_STARTED": "not started", "FSDP_SMOKE": "fsdp-smoke"}


def test_a_stage_file_is_a_sink_and_a_prefix_wraps_any_sink(tmp_path):
    env = {STAGE_DIR_ENV: str(tmp_path)}
    sinks: list[stages.StageSink] = [StageFile(4, "n2", env), stages.PrefixedSink(StageFile(5, "n2", env), "bench ")]
    for sink in sinks:
        sink.record(stages.Stage.TOPOLOGY)
    assert [(r.rank, r.stage, r.code) for r in read_stages(tmp_path)] == [(4, "topology", None), (5, "bench topology", None)]
    assert json.loads((tmp_path / "rank4.json").read_text()).keys() == {"rank", "host", "stage", "since", "code", "error"}
